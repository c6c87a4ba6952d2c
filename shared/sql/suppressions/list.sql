-- Newest first, strictly after the position ($2 created at, $3 channel, $4 hash); $1 a
-- channel to filter on (NULL: any); $5 rows.
SELECT channel, address_hash, address, reason, created_at
FROM suppressions
WHERE ($1::text IS NULL OR channel = $1)
  AND (created_at, channel, address_hash) < ($2, $3, $4)
ORDER BY created_at DESC, channel DESC, address_hash DESC
LIMIT $5
