-- Gives endpoint $1 the new secret $3; the current one keeps signing until now() + $4 ms,
-- beside the earlier ones still inside their own windows (newest first, at most $5 of
-- them: beyond that the oldest stops early). Owner $2 as in delete.sql. The single
-- previous_secret columns, which processes of the release before V27 read, follow the
-- newest; a secret found only there (rotated out by such a process) is kept too. Returns
-- the end of the secret just replaced.
UPDATE webhook_endpoints w
SET (previous_secrets, previous_secrets_valid_until) = (
        SELECT array_agg(kept.secret ORDER BY kept.valid_until DESC),
               array_agg(kept.valid_until ORDER BY kept.valid_until DESC)
        FROM (SELECT secret, valid_until
              FROM (SELECT w.secret, now() + $4::int8 * interval '1 millisecond' AS valid_until
                    UNION ALL
                    SELECT p.secret, p.valid_until
                    FROM unnest(w.previous_secrets, w.previous_secrets_valid_until)
                         AS p(secret, valid_until)
                    WHERE p.valid_until > now()
                    UNION ALL
                    SELECT w.previous_secret, w.previous_secret_valid_until
                    WHERE w.previous_secret_valid_until > now()
                      AND NOT w.previous_secret = ANY (w.previous_secrets)) AS candidates
              ORDER BY valid_until DESC
              LIMIT $5) AS kept),
    previous_secret = w.secret,
    previous_secret_valid_until = now() + $4::int8 * interval '1 millisecond',
    secret = $3
WHERE id = $1 AND ($2::uuid IS NULL OR owner_key_id = $2)
RETURNING id, previous_secret_valid_until
