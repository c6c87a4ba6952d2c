-- Why: a campaign's progress (GET /campaigns/{id}, the listing, the step that marks it
-- DONE and its campaign.done event) counted the campaign's notifications by status on
-- every read: 100–200 ms a read at 100,000 recipients, spent beside the campaign's own
-- expansion and drain. The counts are now kept the way /metrics keeps its counts (V7): a
-- statement-level trigger adds each statement's net change per campaign and status to
-- the shard row of its connection, and a read sums a few rows.
--
-- Retention deleting a campaign's finished notifications does not lower its counts:
-- they say what the campaign's notifications reached, which outlives the rows.

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

CREATE TRIGGER campaign_counts_on_insert AFTER INSERT ON notifications
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION campaign_counts_apply();
CREATE TRIGGER campaign_counts_on_update AFTER UPDATE ON notifications
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION campaign_counts_apply();
