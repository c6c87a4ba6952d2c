INSERT INTO api_keys (id, name, scope, secret_hash) VALUES ($1, $2, $3, $4)
