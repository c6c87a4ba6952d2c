-- The notifications owner $2 (NULL: anonymous) created with any of the keys $1 (a batch's
-- items that were not inserted).
SELECT idempotency_key, id, fingerprint
FROM notifications
WHERE coalesce(owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid) = coalesce($2, '00000000-0000-0000-0000-000000000000'::uuid)
  AND idempotency_key = ANY($1)
