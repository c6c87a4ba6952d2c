-- Every active key: its id, scope and secret hash (the authenticator's snapshot).
SELECT id, scope, secret_hash FROM api_keys WHERE revoked_at IS NULL
