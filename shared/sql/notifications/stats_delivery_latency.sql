-- Deliveries per latency bucket (0 to 10: the bounds in order; 11: above every bound)
-- and their summed latency, as the triggers of migration V7 count every transition to SENT.
SELECT bucket, sum(deliveries)::int8 AS count, sum(seconds)::float8 AS sum
FROM delivery_latency_counts
GROUP BY bucket
