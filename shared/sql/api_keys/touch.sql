-- Records that key $1 was used now (the authenticator does so at most once an hour).
UPDATE api_keys SET last_used_at = now() WHERE id = $1
