-- Delivery latency (sent_at - scheduled_at, floored at 0) of SENT notifications, counted
-- per bucket. $1: the bucket bounds negated and reversed, $2: how many bounds. Prometheus
-- buckets are "less than or equal": a value's bucket is the number of bounds strictly
-- below it, which width_bucket gives on negated values.
SELECT $2::int4 - width_bucket(-latency, $1::float8[]) AS bucket, count(*) AS count,
       sum(latency) AS sum
FROM (SELECT greatest(extract(epoch FROM sent_at - scheduled_at)::float8, 0) AS latency
      FROM notifications WHERE status = 'SENT') AS sent
GROUP BY bucket
