-- Every endpoint (operators), oldest first; secrets are never listed.
SELECT id, url, event_types, operator, created_at,
       -- The last moment a rotated secret still signs (NULL when none does): the newest
       -- rotated secret ends last, and rotate.sql keeps it in previous_secret too (as does
       -- a process of the release before V27).
       CASE WHEN previous_secret_valid_until > now() THEN previous_secret_valid_until END
           AS previous_secret_valid_until
FROM webhook_endpoints
ORDER BY created_at, id
