-- Why: the trigger that keeps the queue table deleted a queue row by joining the queue to
-- the statement's transition table. PL/pgSQL plans that join once per connection and
-- keeps the plan; made while the queue was nearly empty (a fresh deployment, a quiet
-- hour), it was a nested loop that walked the whole queue index and, for every entry,
-- the whole transition table. Once the queue held a backlog, retention's delete of 1,000
-- finished notifications ran for 13.7 s, or until the statement timeout cancelled it (B10
-- soak, 100,000 queued: retention fell behind and a round drained at 0.37-0.42 of the
-- first), and a record statement could pay the same walk for its batch.
--
-- The rows are now named by key (`= ANY`), as the V22 trigger names the children of a
-- deleted notification, and the function plans without sequential scans: the queue
-- empties and fills again, and with statistics that said it was empty the planner read
-- it whole, once per statement, even to find rows by key. The queue is the only table the
-- function reads, always by its primary key, so the setting changes no other plan. The
-- behaviour is the same, so processes of the previous release, still running during a
-- rollout, keep working.

CREATE OR REPLACE FUNCTION queue_follow_notifications() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A statement that changed no row has nothing to apply.
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
    ELSIF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO queue (id, owner_key_id, channel, class, priority, status,
                           next_attempt_at, lease_expires_at, expires_at, created_at)
        SELECT id, owner_key_id, channel, class, priority, status, next_attempt_at,
               lease_expires_at, expires_at, created_at
        FROM new_rows
        WHERE status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED');
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM queue
        WHERE id = ANY (ARRAY(SELECT id FROM old_rows
                              WHERE status IN ('PENDING', 'PROCESSING', 'FAILED',
                                               'DEAD_LETTERED')));
    ELSE
        -- Left the open statuses: the queue row goes.
        DELETE FROM queue
        WHERE id = ANY (ARRAY(SELECT id FROM new_rows
                              WHERE status NOT IN ('PENDING', 'PROCESSING', 'FAILED',
                                                   'DEAD_LETTERED')));
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

ALTER FUNCTION queue_follow_notifications() SET enable_seqscan = off;
