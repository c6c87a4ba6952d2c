SELECT id, name, scope, created_at, revoked_at FROM api_keys ORDER BY created_at
