-- The endpoints of one owner ($1), oldest first; secrets are never listed.
SELECT id, url, event_types, operator, created_at,
       CASE WHEN previous_secret_valid_until > now() THEN previous_secret_valid_until END
           AS previous_secret_valid_until
FROM webhook_endpoints
WHERE owner_key_id = $1
ORDER BY created_at, id
