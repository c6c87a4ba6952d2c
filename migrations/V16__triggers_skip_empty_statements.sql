-- Why: PostgreSQL fires a statement-level trigger for every statement, also one that
-- changed no row. A sweeper claims each channel it serves on every step, and a claim
-- that finds nothing due is still an UPDATE of notifications: its three triggers each ran
-- their aggregates and upserts over empty transition tables. In B9 (a campaign on EMAIL,
-- nothing on SMS or PUSH) 27,000 empty claims spent 10 s of database time that way. Each
-- function now returns at once when its statement changed nothing; what it does
-- otherwise is unchanged (V7, V13, V15).

CREATE OR REPLACE FUNCTION queue_follow_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION notification_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_shard smallint := (pg_backend_pid() % 64)::smallint;
BEGIN
    -- A statement that changed no row has nothing to apply.
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
    ELSIF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO notification_counts AS c
            (status, channel, priority, shard, notifications, attempts, deferrals)
        SELECT status, channel, priority, my_shard, count(*), sum(attempt_count),
               sum(rate_limit_deferrals)
        FROM new_rows GROUP BY status, channel, priority ORDER BY status, channel, priority
        ON CONFLICT ON CONSTRAINT notification_counts_pkey DO UPDATE
        SET notifications = c.notifications + excluded.notifications,
            attempts = c.attempts + excluded.attempts,
            deferrals = c.deferrals + excluded.deferrals;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO notification_counts AS c
            (status, channel, priority, shard, notifications, attempts, deferrals)
        SELECT status, channel, priority, my_shard, -count(*), -sum(attempt_count),
               -sum(rate_limit_deferrals)
        FROM old_rows GROUP BY status, channel, priority ORDER BY status, channel, priority
        ON CONFLICT ON CONSTRAINT notification_counts_pkey DO UPDATE
        SET notifications = c.notifications + excluded.notifications,
            attempts = c.attempts + excluded.attempts,
            deferrals = c.deferrals + excluded.deferrals;
    ELSE
        INSERT INTO notification_counts AS c
            (status, channel, priority, shard, notifications, attempts, deferrals)
        SELECT status, channel, priority, my_shard, sum(n), sum(a), sum(d)
        FROM (SELECT status, channel, priority, 1 AS n, attempt_count AS a,
                     rate_limit_deferrals AS d FROM new_rows
              UNION ALL
              SELECT status, channel, priority, -1, -attempt_count, -rate_limit_deferrals
              FROM old_rows) AS changes
        GROUP BY status, channel, priority
        HAVING sum(n) <> 0 OR sum(a) <> 0 OR sum(d) <> 0
        ORDER BY status, channel, priority
        ON CONFLICT ON CONSTRAINT notification_counts_pkey DO UPDATE
        SET notifications = c.notifications + excluded.notifications,
            attempts = c.attempts + excluded.attempts,
            deferrals = c.deferrals + excluded.deferrals;

        INSERT INTO delivery_latency_counts AS c (bucket, shard, deliveries, seconds)
        SELECT notification_latency_bucket(latency), my_shard, count(*), sum(latency)
        FROM (SELECT greatest(extract(epoch FROM n.sent_at - n.scheduled_at)::float8, 0) AS latency
              FROM new_rows n JOIN old_rows o ON o.id = n.id
              WHERE n.status = 'SENT' AND o.status <> 'SENT') AS sent
        GROUP BY 1 ORDER BY 1
        ON CONFLICT ON CONSTRAINT delivery_latency_counts_pkey DO UPDATE
        SET deliveries = c.deliveries + excluded.deliveries,
            seconds = c.seconds + excluded.seconds;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION webhook_event_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_shard smallint := (pg_backend_pid() % 64)::smallint;
BEGIN
    -- A statement that changed no row has nothing to apply.
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
    ELSIF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO webhook_event_counts AS c (dispatch_state, shard, events)
        SELECT dispatch_state, my_shard, count(*) FROM new_rows
        GROUP BY dispatch_state ORDER BY dispatch_state
        ON CONFLICT ON CONSTRAINT webhook_event_counts_pkey DO UPDATE
        SET events = c.events + excluded.events;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO webhook_event_counts AS c (dispatch_state, shard, events)
        SELECT dispatch_state, my_shard, -count(*) FROM old_rows
        GROUP BY dispatch_state ORDER BY dispatch_state
        ON CONFLICT ON CONSTRAINT webhook_event_counts_pkey DO UPDATE
        SET events = c.events + excluded.events;
    ELSE
        INSERT INTO webhook_event_counts AS c (dispatch_state, shard, events)
        SELECT dispatch_state, my_shard, sum(n)
        FROM (SELECT dispatch_state, 1 AS n FROM new_rows
              UNION ALL SELECT dispatch_state, -1 FROM old_rows) AS changes
        GROUP BY dispatch_state HAVING sum(n) <> 0 ORDER BY dispatch_state
        ON CONFLICT ON CONSTRAINT webhook_event_counts_pkey DO UPDATE
        SET events = c.events + excluded.events;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION campaign_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_shard smallint := (pg_backend_pid() % 64)::smallint;
BEGIN
    -- A statement that changed no row has nothing to apply (it runs on INSERT and
    -- UPDATE only: retention's deletes leave the counts as they are).
    IF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
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
