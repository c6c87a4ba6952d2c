-- Stores a new campaign unless its owner already used the idempotency key (the unique
-- constraint campaigns_key_per_owner arbitrates simultaneous submissions). $1 id, $2 owner,
-- $3 key, $4 fingerprint, $5 name, $6 channel, $7 template id, $8 pinned version, $9 data,
-- $10 category, $11 priority, $12 sendAt (or NULL), $13 recipient ids (NULL: every profile
-- of the owner), $14 audience size.
INSERT INTO campaigns (id, owner, idempotency_key, fingerprint, name, channel, template_id,
                       template_version, data, category, priority, send_at, recipient_ids,
                       audience_size)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (owner, idempotency_key) DO NOTHING
RETURNING id, owner, idempotency_key, fingerprint, name, channel, template_id, template_version, data, category, priority, send_at, recipient_ids IS NULL AS all_recipients, audience_size, expanded, status, created_at, finished_at
