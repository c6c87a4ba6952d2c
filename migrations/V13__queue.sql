-- Why: every status transition of a notification changed a column some index covered
-- (the claim order, the lease expiry, the listings by status), so no update was HOT: one
-- notification left four heap versions and two dozen index entries behind. The moving
-- part of a notification now has its own narrow table, `queue`, holding one row per
-- notification that is PENDING, PROCESSING, FAILED or DEAD_LETTERED (the ones a sweeper,
-- the recovery, the expiry or a redrive can still act on) and no row once it is SENT,
-- CANCELLED, SUPPRESSED or EXPIRED. The notification row keeps every column, but no index
-- on `notifications` covers a column that a transition changes, so its transitions are
-- HOT updates in the room `fillfactor` leaves on each page.
--
-- `queue` is a projection the database maintains: statement-level triggers on
-- `notifications` insert, update and delete its rows, so no statement can forget it.
-- The claim, the recovery, the expiry, the queue lag and the listings of open statuses
-- read `queue` (and its partial indexes) instead of indexes on `notifications`.

CREATE TABLE queue (
    id                uuid        PRIMARY KEY,
    owner_key_id      uuid,
    channel           text        NOT NULL,
    class             text        NOT NULL,
    priority          smallint    NOT NULL,
    status            text        NOT NULL CHECK (status IN
                          ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED')),
    next_attempt_at   timestamptz NOT NULL,
    lease_expires_at  timestamptz,
    expires_at        timestamptz,
    created_at        timestamptz NOT NULL
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_insert_scale_factor = 0.01);

-- The claim reads one channel and class at a time, each priority from the top.
CREATE INDEX queue_claim_order ON queue (channel, class, priority, next_attempt_at, created_at)
    WHERE status = 'PENDING';
-- Recovery of expired claims.
CREATE INDEX queue_lease_expiry ON queue (lease_expires_at) WHERE status = 'PROCESSING';
-- The expiry step: PENDING notifications that can expire, soonest first.
CREATE INDEX queue_expiry ON queue (expires_at)
    WHERE status = 'PENDING' AND expires_at IS NOT NULL;
-- Listing (and redriving) the open statuses, newest first; the dead-letter queue above all.
CREATE INDEX queue_list_by_status ON queue (status, created_at DESC, id DESC);
CREATE INDEX queue_list_by_owner_status ON queue (owner_key_id, status, created_at DESC, id DESC);

-- What is open today enters the queue.
INSERT INTO queue (id, owner_key_id, channel, class, priority, status, next_attempt_at,
                   lease_expires_at, expires_at, created_at)
SELECT id, owner_key_id, channel, class, priority, status, next_attempt_at,
       lease_expires_at, expires_at, created_at
FROM notifications
WHERE status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED');

CREATE FUNCTION queue_follow_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO queue (id, owner_key_id, channel, class, priority, status,
                           next_attempt_at, lease_expires_at, expires_at, created_at)
        SELECT id, owner_key_id, channel, class, priority, status, next_attempt_at,
               lease_expires_at, expires_at, created_at
        FROM new_rows
        WHERE status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED');
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM queue q USING old_rows o
        WHERE q.id = o.id AND o.status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED');
    ELSE
        -- Left the open statuses: the queue row goes.
        DELETE FROM queue q USING new_rows n
        WHERE q.id = n.id
          AND n.status NOT IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED');
        -- Entered or moved within them: the queue row follows. Updates that change none
        -- of its columns (a provider message id, a redaction) do not touch it.
        INSERT INTO queue AS q (id, owner_key_id, channel, class, priority, status,
                                next_attempt_at, lease_expires_at, expires_at, created_at)
        SELECT n.id, n.owner_key_id, n.channel, n.class, n.priority, n.status,
               n.next_attempt_at, n.lease_expires_at, n.expires_at, n.created_at
        FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE n.status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED')
          AND (n.status, n.next_attempt_at, n.lease_expires_at, n.expires_at, n.priority,
               n.channel, n.class, n.owner_key_id, n.created_at)
              IS DISTINCT FROM
              (o.status, o.next_attempt_at, o.lease_expires_at, o.expires_at, o.priority,
               o.channel, o.class, o.owner_key_id, o.created_at)
        ON CONFLICT (id) DO UPDATE
        SET status = excluded.status, next_attempt_at = excluded.next_attempt_at,
            lease_expires_at = excluded.lease_expires_at, expires_at = excluded.expires_at,
            priority = excluded.priority, channel = excluded.channel, class = excluded.class,
            owner_key_id = excluded.owner_key_id, created_at = excluded.created_at;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER queue_follows_insert AFTER INSERT ON notifications
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queue_follow_notifications();
CREATE TRIGGER queue_follows_update AFTER UPDATE ON notifications
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queue_follow_notifications();
CREATE TRIGGER queue_follows_delete AFTER DELETE ON notifications
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queue_follow_notifications();

-- No index on notifications covers a column a transition changes.
DROP INDEX notifications_claim_order;
DROP INDEX notifications_lease_expiry;
DROP INDEX notifications_expiry;
DROP INDEX notifications_list_by_status;
DROP INDEX notifications_list_by_owner_status;
-- Room on each page for the two HOT versions a notification's life adds.
ALTER TABLE notifications SET (fillfactor = 70);

-- Retention deletes finished notifications with what refers to them; the webhook events
-- of a notification go with it. Retention of delivered events on their own is separate.
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_notification_id_fkey;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_notification_id_fkey
    FOREIGN KEY (notification_id) REFERENCES notifications (id) ON DELETE CASCADE;

-- Delivered and given-up webhook events are deleted by age, oldest first.
CREATE INDEX webhook_events_age ON webhook_events (created_at);

-- Rows the retention step deleted, per table; sharded by connection like the other
-- counters, so sweepers purging at once do not queue on one row.
CREATE TABLE retention_counts (
    kind     text     NOT NULL CHECK (kind IN ('notifications', 'webhook_events')),
    shard    smallint NOT NULL,
    deleted  bigint   NOT NULL,
    PRIMARY KEY (kind, shard)
);
