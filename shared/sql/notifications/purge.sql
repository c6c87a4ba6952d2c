-- Deletes up to $3 finished notifications: SENT, FAILED, CANCELLED, SUPPRESSED and EXPIRED
-- ones whose final transition is more than $1 seconds old, DEAD_LETTERED ones more than
-- $2 seconds old. Their attempts go with them (the trigger of V22), the queue row with the
-- trigger; their webhook events, the rate-limit reservation and the simulated provider's
-- record of the delivery (keyed by the notification id; a deleted notification is never
-- sent again, so its key has nothing left to guard) here. Both deleted counts, of
-- notifications and of their webhook events, are added to retention_counts: the events
-- are deleted here rather than left to the trigger so that they are counted (the trigger
-- finds none left). The deletes look their rows up by key (`= ANY`): joined to the batch,
-- the planner hashed the whole of both tables for every batch (a third of the statement's
-- time at 100,000 rows). Walks notifications_list_all from the oldest: a notification is
-- never final before it was created, so nothing created after the shorter cutoff is read.
-- Rows another transaction holds are skipped, and the next step takes them.
WITH cutoff AS (
    SELECT now() - $1::int8 * interval '1 second' AS finished,
           now() - $2::int8 * interval '1 second' AS dead_lettered
), doomed AS (
    SELECT n.id FROM notifications n, cutoff
    WHERE n.created_at < greatest(cutoff.finished, cutoff.dead_lettered)
      AND ((n.status IN ('SENT', 'FAILED', 'CANCELLED', 'SUPPRESSED', 'EXPIRED')
            AND n.updated_at < cutoff.finished)
           OR (n.status = 'DEAD_LETTERED' AND n.updated_at < cutoff.dead_lettered))
    ORDER BY n.created_at, n.id
    LIMIT $3 FOR UPDATE OF n SKIP LOCKED
), deleted AS (
    DELETE FROM notifications n WHERE n.id = ANY (ARRAY(SELECT id FROM doomed)) RETURNING n.id
), reservations AS (
    DELETE FROM rate_limit_reservations r
    WHERE r.notification_id = ANY (ARRAY(SELECT id FROM deleted))
), simulated AS (
    DELETE FROM simulated_deliveries s
    WHERE s.delivery_key = ANY (ARRAY(SELECT id FROM deleted))
), events AS (
    DELETE FROM webhook_events e
    WHERE e.notification_id = ANY (ARRAY(SELECT id FROM deleted)) RETURNING 1
), counted AS (
    INSERT INTO retention_counts AS c (kind, shard, deleted)
    SELECT kind, (pg_backend_pid() % 64)::smallint, gone
    FROM (VALUES ('notifications', (SELECT count(*) FROM deleted)),
                 ('webhook_events', (SELECT count(*) FROM events))) AS v(kind, gone)
    WHERE gone > 0
    ON CONFLICT ON CONSTRAINT retention_counts_pkey DO UPDATE
    SET deleted = c.deleted + excluded.deleted
)
SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT count(*) FROM events) AS events
