-- Every endpoint (operators), oldest first; secrets are never listed.
SELECT id, url, event_types, operator, created_at,
       -- The last moment a rotated secret still signs (NULL when none does): the newest
       -- rotated secret, first in the array, ends last.
       CASE WHEN previous_secrets_valid_until[1] > now() THEN previous_secrets_valid_until[1] END
           AS previous_secret_valid_until
FROM webhook_endpoints
ORDER BY created_at, id
