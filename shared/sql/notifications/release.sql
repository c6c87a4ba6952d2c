-- Hands claims back untried: PENDING, attempt refunded, due at the time given ($3; NULL
-- means now, a time means a rate-limit deferral and is counted as one). Only rows still
-- PROCESSING with the token given ($1 ids, $2 tokens) change. A claim whose person was
-- erased or whose campaign was cancelled meanwhile is CANCELLED instead, as erasure and a
-- campaign's cancel cancel what waits.
UPDATE notifications n
SET status = CASE WHEN n.recipient = '[erased]'
                       OR EXISTS (SELECT 1 FROM campaigns c
                                  WHERE c.id = (n.payload #>> '{$template,campaign}')::uuid
                                    AND c.status = 'CANCELLED')
                  THEN 'CANCELLED' ELSE 'PENDING' END,
    cancelled_at = CASE WHEN n.recipient = '[erased]'
                             OR EXISTS (SELECT 1 FROM campaigns c
                                        WHERE c.id = (n.payload #>> '{$template,campaign}')::uuid
                                          AND c.status = 'CANCELLED')
                        THEN now() ELSE n.cancelled_at END,
    attempt_count = n.attempt_count - 1,
    next_attempt_at = coalesce(held.due, now()),
    rate_limit_deferrals = n.rate_limit_deferrals + (held.due IS NOT NULL)::int,
    claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS held(id, token, due)
WHERE n.id = held.id AND n.claim_token = held.token AND n.status = 'PROCESSING'
