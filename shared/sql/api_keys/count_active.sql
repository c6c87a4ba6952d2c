SELECT count(*) FROM api_keys WHERE revoked_at IS NULL
