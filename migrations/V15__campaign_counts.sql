-- Why (1): a campaign's progress (GET /campaigns/{id}, the listing, the step that marks it
-- DONE and its campaign.done event) counted the campaign's notifications by status on
-- every read: 100–200 ms a read at 100,000 recipients, spent beside the campaign's own
-- expansion and drain. The counts are now kept the way /metrics keeps its counts (V7): a
-- statement-level trigger adds each statement's net change per campaign and status to
-- the shard row of its connection, and a read sums a few rows.
--
-- Retention deleting a campaign's finished notifications does not lower its counts:
-- they say what the campaign's notifications reached, which outlives the rows.
--
-- Why (2): the queue table of V13 is checked against the notifications once, below.

CREATE TABLE campaign_counts (
    -- The campaign's id as the notification's payload names it ('$template'.campaign).
    campaign       text     NOT NULL,
    status         text     NOT NULL,
    shard          smallint NOT NULL,
    notifications  bigint   NOT NULL,
    PRIMARY KEY (campaign, status, shard)
);

CREATE FUNCTION campaign_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_shard smallint := (pg_backend_pid() % 64)::smallint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO campaign_counts AS c (campaign, status, shard, notifications)
        SELECT payload #>> '{$template,campaign}', status, my_shard, count(*)
        FROM new_rows
        WHERE payload #>> '{$template,campaign}' IS NOT NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT ON CONSTRAINT campaign_counts_pkey DO UPDATE
        SET notifications = c.notifications + excluded.notifications;
    ELSE
        INSERT INTO campaign_counts AS c (campaign, status, shard, notifications)
        SELECT campaign, status, my_shard, sum(n)
        FROM (SELECT payload #>> '{$template,campaign}' AS campaign, status, 1 AS n
              FROM new_rows
              UNION ALL
              SELECT payload #>> '{$template,campaign}', status, -1 FROM old_rows) AS changes
        WHERE campaign IS NOT NULL
        GROUP BY campaign, status
        HAVING sum(n) <> 0
        ORDER BY campaign, status
        ON CONFLICT ON CONSTRAINT campaign_counts_pkey DO UPDATE
        SET notifications = c.notifications + excluded.notifications;
    END IF;
    RETURN NULL;
END
$$;

-- No writer may slip between the counts taken below and the triggers that keep them.
LOCK TABLE notifications IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO campaign_counts (campaign, status, shard, notifications)
SELECT payload #>> '{$template,campaign}', status, 0, count(*)
FROM notifications
WHERE payload #>> '{$template,campaign}' IS NOT NULL
GROUP BY 1, 2;

-- While no writer runs, the queue is made to mirror the open notifications exactly. V13
-- copied them before it created the triggers that keep the queue, so a notification
-- written between the two was never queued (no claim would find it), or kept the state
-- it had at the copy.
DELETE FROM queue q
WHERE NOT EXISTS (SELECT 1 FROM notifications n
                  WHERE n.id = q.id
                    AND n.status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED'));
INSERT INTO queue AS q (id, owner_key_id, channel, class, priority, status, next_attempt_at,
                        lease_expires_at, expires_at, created_at)
SELECT id, owner_key_id, channel, class, priority, status, next_attempt_at,
       lease_expires_at, expires_at, created_at
FROM notifications
WHERE status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED')
ON CONFLICT (id) DO UPDATE
SET owner_key_id = excluded.owner_key_id, channel = excluded.channel,
    class = excluded.class, priority = excluded.priority, status = excluded.status,
    next_attempt_at = excluded.next_attempt_at, lease_expires_at = excluded.lease_expires_at,
    expires_at = excluded.expires_at, created_at = excluded.created_at
WHERE (q.owner_key_id, q.channel, q.class, q.priority, q.status, q.next_attempt_at,
       q.lease_expires_at, q.expires_at, q.created_at)
      IS DISTINCT FROM
      (excluded.owner_key_id, excluded.channel, excluded.class, excluded.priority,
       excluded.status, excluded.next_attempt_at, excluded.lease_expires_at,
       excluded.expires_at, excluded.created_at);

CREATE TRIGGER campaign_counts_on_insert AFTER INSERT ON notifications
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION campaign_counts_apply();
CREATE TRIGGER campaign_counts_on_update AFTER UPDATE ON notifications
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION campaign_counts_apply();
