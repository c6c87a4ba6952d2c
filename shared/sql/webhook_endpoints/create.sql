-- Registers an endpoint: $1 id, $2 owner key (the nil key when anonymous), $3 operator,
-- $4 url, $5 event types (NULL: all), $6 secret.
INSERT INTO webhook_endpoints (id, owner_key_id, operator, url, event_types, secret)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id, url, event_types, operator, created_at, previous_secret_valid_until
