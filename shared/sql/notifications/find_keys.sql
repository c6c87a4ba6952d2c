-- The rows holding any of these idempotency keys (a batch's items that were not inserted).
SELECT idempotency_key, id, fingerprint, owner_key_id
FROM notifications
WHERE idempotency_key = ANY($1)
