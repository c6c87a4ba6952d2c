-- Whether endpoint $1 exists for owner $2 ($2 NULL: an operator, any endpoint).
SELECT EXISTS (
    SELECT 1 FROM webhook_endpoints
    WHERE id = $1 AND ($2::uuid IS NULL OR owner_key_id = $2)
) AS found
