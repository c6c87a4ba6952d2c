-- Deletes endpoint $1 if owner $2 may manage it ($2 NULL: an operator, any endpoint).
DELETE FROM webhook_endpoints
WHERE id = $1 AND ($2::uuid IS NULL OR owner_key_id = $2)
