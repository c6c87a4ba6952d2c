-- Why: /metrics counted every row on every scrape (per status, the latency histogram over
-- every SENT row, the outbox by state), which grows with the tables. Counts are now kept
-- by statement-level triggers: each statement adds its net change per group in one upsert.
-- Each connection writes its own shard row (backend pid modulo 64), so concurrent
-- workers do not queue on one counter row; a scrape sums a few hundred rows.

CREATE TABLE notification_counts (
    status         text     NOT NULL,
    channel        text     NOT NULL,
    priority       smallint NOT NULL,
    shard          smallint NOT NULL,
    notifications  bigint   NOT NULL,
    attempts       bigint   NOT NULL,
    deferrals      bigint   NOT NULL,
    PRIMARY KEY (status, channel, priority, shard)
);

-- Delivery latency (sent_at - scheduled_at, floored at 0) of every transition to SENT,
-- per histogram bucket: cumulative, as a Prometheus histogram is. The bucket is the index
-- of the first bound the latency does not exceed (the bounds live in the code and in
-- notification_latency_bucket below; 11 means above every bound).
CREATE TABLE delivery_latency_counts (
    bucket         smallint         NOT NULL,
    shard          smallint         NOT NULL,
    deliveries     bigint           NOT NULL,
    seconds        double precision NOT NULL,
    PRIMARY KEY (bucket, shard)
);

CREATE TABLE webhook_event_counts (
    dispatch_state text     NOT NULL,
    shard          smallint NOT NULL,
    events         bigint   NOT NULL,
    PRIMARY KEY (dispatch_state, shard)
);

CREATE FUNCTION notification_latency_bucket(seconds double precision) RETURNS smallint
LANGUAGE sql IMMUTABLE AS $$
    SELECT count(*)::smallint
    FROM unnest(ARRAY[0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]::float8[]) AS bound
    WHERE seconds > bound
$$;

CREATE FUNCTION notification_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_shard smallint := (pg_backend_pid() % 64)::smallint;
BEGIN
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

CREATE FUNCTION webhook_event_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_shard smallint := (pg_backend_pid() % 64)::smallint;
BEGIN
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

CREATE TRIGGER notification_counts_on_insert AFTER INSERT ON notifications
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION notification_counts_apply();
CREATE TRIGGER notification_counts_on_update AFTER UPDATE ON notifications
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION notification_counts_apply();
CREATE TRIGGER notification_counts_on_delete AFTER DELETE ON notifications
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION notification_counts_apply();

CREATE TRIGGER webhook_event_counts_on_insert AFTER INSERT ON webhook_events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_event_counts_apply();
CREATE TRIGGER webhook_event_counts_on_update AFTER UPDATE ON webhook_events
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_event_counts_apply();
CREATE TRIGGER webhook_event_counts_on_delete AFTER DELETE ON webhook_events
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_event_counts_apply();

-- What exists already is counted once, under shard 0.
INSERT INTO notification_counts (status, channel, priority, shard, notifications, attempts, deferrals)
SELECT status, channel, priority, 0, count(*), sum(attempt_count), sum(rate_limit_deferrals)
FROM notifications GROUP BY status, channel, priority;

INSERT INTO delivery_latency_counts (bucket, shard, deliveries, seconds)
SELECT notification_latency_bucket(latency), 0, count(*), sum(latency)
FROM (SELECT greatest(extract(epoch FROM sent_at - scheduled_at)::float8, 0) AS latency
      FROM notifications WHERE status = 'SENT') AS sent
GROUP BY 1;

INSERT INTO webhook_event_counts (dispatch_state, shard, events)
SELECT dispatch_state, 0, count(*) FROM webhook_events GROUP BY dispatch_state;
