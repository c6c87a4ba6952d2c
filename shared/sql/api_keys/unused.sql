-- Active keys not used (or, never used, not created) in the last $1 days, longest unused first.
SELECT id, name, scope, created_at, last_used_at
FROM api_keys
WHERE revoked_at IS NULL
  AND coalesce(last_used_at, created_at) < now() - $1::int8 * interval '1 day'
ORDER BY coalesce(last_used_at, created_at), id
