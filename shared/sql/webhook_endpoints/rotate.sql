-- Gives endpoint $1 the new secret $3; the current one keeps signing until now() + $4 ms
-- (a previous secret still inside its window is dropped: two at most). Owner $2 as in
-- delete.sql.
UPDATE webhook_endpoints
SET previous_secret = secret,
    previous_secret_valid_until = now() + $4::int8 * interval '1 millisecond',
    secret = $3
WHERE id = $1 AND ($2::uuid IS NULL OR owner_key_id = $2)
RETURNING id, previous_secret_valid_until
