-- Campaigns still EXPANDING whose last chunk (or creation) is at least $1 seconds old,
-- longest stalled first, at most $2; served by campaigns_expanding_by_progress.
SELECT id, name, expanded, audience_size, progressed_at,
       extract(epoch FROM now() - progressed_at)::float8 AS stalled_seconds
FROM campaigns
WHERE status = 'EXPANDING'
  AND progressed_at <= now() - $1::int8 * interval '1 second'
ORDER BY progressed_at, id
LIMIT $2
