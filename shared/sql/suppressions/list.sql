-- Newest first, strictly after the position ($3 created at, $4 channel, $5 hash); $1 a
-- channel and $2 the hashes of one address to filter on (NULL: any); $6 rows.
SELECT channel, address_hash, address, reason, created_at
FROM suppressions
WHERE ($1::text IS NULL OR channel = $1)
  AND ($2::text[] IS NULL OR address_hash = ANY ($2))
  AND (created_at, channel, address_hash) < ($3, $4, $5)
ORDER BY created_at DESC, channel DESC, address_hash DESC
LIMIT $6
