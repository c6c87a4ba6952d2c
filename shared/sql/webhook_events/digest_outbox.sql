-- The outbox for the digest, per destination (an endpoint, or NULL for the default
-- WEBHOOK_URL).
--
-- Late events: of the events due more than $2 seconds ago (waiting, or a lease expired),
-- the $3 oldest (one ordered range of webhook_events_due, so a backlog of millions reads
-- no more than $3 rows), grouped by destination: how many of them, the oldest due time and
-- the endpoint's URL, oldest first, at most ten. Events not routed yet form a destination
-- of their own (routed false): routing is the drainer's first step, so their lateness says
-- the drainer is not running.
--
-- Given-up events: those given up in the last $1 seconds (webhook_events_given_up_recent),
-- and per destination (the ten with most first) how many, since when they were created
-- (what a replay's `since` takes), the endpoint's URL and the three most frequent errors.
--
-- Events of an endpoint deleted since are left out of both: nothing can be done about
-- them (the drainer gives them up), and a replay would only give them up again.
WITH late AS (
    -- A DISPATCHING row never routed was claimed before routing existed, for the
    -- default URL (as claim.sql takes it).
    SELECT e.endpoint_id, e.routed_at IS NOT NULL OR e.dispatch_state = 'DISPATCHING' AS routed,
           e.next_dispatch_at
    FROM webhook_events e
    WHERE e.dispatch_state IN ('PENDING', 'DISPATCHING')
      AND e.next_dispatch_at <= now() - $2::float8 * interval '1 second'
    ORDER BY e.next_dispatch_at
    LIMIT $3
), late_by_destination AS (
    SELECT l.endpoint_id, l.routed, w.url, count(*) AS count, min(l.next_dispatch_at) AS oldest_due
    FROM late l
    LEFT JOIN webhook_endpoints w ON w.id = l.endpoint_id
    WHERE l.endpoint_id IS NULL OR w.id IS NOT NULL
    GROUP BY l.endpoint_id, l.routed, w.url
    ORDER BY min(l.next_dispatch_at), l.endpoint_id NULLS FIRST
    LIMIT 10
), given_up AS (
    SELECT e.endpoint_id, e.created_at, coalesce(left(e.last_error, 200), '') AS error
    FROM webhook_events e
    WHERE e.dispatch_state = 'GIVEN_UP'
      AND e.given_up_at > now() - $1::int8 * interval '1 second'
      AND (e.endpoint_id IS NULL
           OR EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.id = e.endpoint_id))
), per_error AS (
    SELECT endpoint_id, error, count(*) AS count,
           row_number() OVER (PARTITION BY endpoint_id ORDER BY count(*) DESC, error) AS rank
    FROM given_up GROUP BY endpoint_id, error
), per_destination AS (
    SELECT endpoint_id, count(*) AS count, min(created_at) AS since
    FROM given_up GROUP BY endpoint_id
    ORDER BY count(*) DESC, endpoint_id NULLS FIRST LIMIT 10
)
SELECT (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'endpointId', l.endpoint_id, 'url', l.url, 'routed', l.routed,
                   'count', l.count,
                   'lagSeconds', extract(epoch FROM now() - l.oldest_due)::float8,
                   'oldestDue', to_char(l.oldest_due AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
                   ORDER BY l.oldest_due, l.endpoint_id NULLS FIRST), '[]'::jsonb)
        FROM late_by_destination l) AS late_by_destination,
       (SELECT count(*) FROM given_up)::int8 AS given_up,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'endpointId', d.endpoint_id, 'url', w.url, 'count', d.count,
                   -- The API's time format; cut (not rounded) to the millisecond, so a
                   -- replay from it still takes the first event.
                   'since', to_char(d.since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                   'topErrors', (SELECT coalesce(jsonb_agg(jsonb_build_object('error', r.error,
                                                                              'count', r.count)
                                                           ORDER BY r.rank), '[]'::jsonb)
                                 FROM per_error r
                                 WHERE r.endpoint_id IS NOT DISTINCT FROM d.endpoint_id
                                   AND r.rank <= 3))
                   ORDER BY d.count DESC, d.endpoint_id NULLS FIRST), '[]'::jsonb)
        FROM per_destination d LEFT JOIN webhook_endpoints w ON w.id = d.endpoint_id) AS by_destination
