-- The outbox for the digest: the oldest due event's due time (one probe of
-- webhook_events_due), the events given up in the last $1 seconds and their three most
-- frequent errors (webhook_events_given_up_recent).
WITH given_up AS (
    SELECT coalesce(left(e.last_error, 200), '') AS error
    FROM webhook_events e
    WHERE e.dispatch_state = 'GIVEN_UP'
      AND e.given_up_at > now() - $1::int8 * interval '1 second'
), errors AS (
    SELECT error, count(*) AS count FROM given_up GROUP BY error ORDER BY count DESC, error LIMIT 3
)
SELECT (SELECT min(e.next_dispatch_at) FROM webhook_events e
        WHERE e.dispatch_state IN ('PENDING', 'DISPATCHING') AND e.next_dispatch_at <= now()) AS oldest_due,
       (SELECT count(*) FROM given_up)::int8 AS given_up,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('error', error, 'count', count)
                                  ORDER BY count DESC, error), '[]'::jsonb) FROM errors) AS top_errors
