-- Why: an idempotency key belongs to the caller that chose it. Keys were unique across
-- all callers, so one client could learn which keys another had used (a 409) and block
-- its creates by taking predictable keys first. Keys are now unique per owner; anonymous
-- callers (no API keys configured) share the nil owner.

ALTER TABLE notifications DROP CONSTRAINT notifications_idempotency_key_unique;

CREATE UNIQUE INDEX notifications_idempotency_key_per_owner ON notifications
    ((coalesce(owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid)), idempotency_key);

-- A client's listing by status (its dead-letter queue) reads only its own rows.
CREATE INDEX notifications_list_by_owner_status
    ON notifications (owner_key_id, status, created_at DESC, id DESC)
    WHERE owner_key_id IS NOT NULL;
