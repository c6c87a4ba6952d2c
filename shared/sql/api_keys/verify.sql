-- The scope and secret hash of active key $1.
SELECT scope, secret_hash FROM api_keys WHERE id = $1 AND revoked_at IS NULL
