-- Every bucket, refilled to now (without writing), for GET /providers and metrics.
SELECT channel, class, rate,
       least(burst, tokens + rate * greatest(extract(epoch FROM clock_timestamp() - refilled_at)::float8, 0)) AS tokens
FROM token_buckets
ORDER BY channel, class
