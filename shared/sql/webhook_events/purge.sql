-- Deletes up to $2 webhook events that were delivered or given up and are more than $1
-- seconds old, oldest first (read from webhook_events_age), and adds the count to
-- retention_counts. Events still to be sent are never deleted here; they go with their
-- notification.
WITH doomed AS (
    SELECT id FROM webhook_events
    WHERE created_at < now() - $1::int8 * interval '1 second'
      AND dispatch_state IN ('DELIVERED', 'GIVEN_UP')
    ORDER BY created_at
    LIMIT $2 FOR UPDATE SKIP LOCKED
), deleted AS (
    -- By primary key, as notifications/purge.sql: a join to doomed could read the whole table.
    DELETE FROM webhook_events e WHERE e.id = ANY (ARRAY(SELECT id FROM doomed)) RETURNING e.id
), counted AS (
    INSERT INTO retention_counts AS c (kind, shard, deleted)
    SELECT 'webhook_events', (pg_backend_pid() % 64)::smallint, count(*) FROM deleted
    HAVING count(*) > 0
    ON CONFLICT ON CONSTRAINT retention_counts_pkey DO UPDATE
    SET deleted = c.deleted + excluded.deleted
)
SELECT count(*) AS deleted FROM deleted
