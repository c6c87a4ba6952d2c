-- The start fence, just before the provider call: returns the ids of the claims ($1 ids,
-- $2 tokens) this worker still holds. A claim whose lease has less than $3 ms left is
-- renewed to a full lease of $4 ms; the others are only read, so the usual fence writes
-- nothing. The clock is read here (clock_timestamp), not at the start of the transaction:
-- the transaction may have waited on recipient locks before this statement.
WITH held AS (
    SELECT n.id, n.claim_token,
           n.lease_expires_at >= clock_timestamp() + $3::int8 * interval '1 millisecond' AS enough
    FROM notifications n
    JOIN unnest($1::uuid[], $2::uuid[]) AS mine(id, token)
      ON n.id = mine.id AND n.claim_token = mine.token
    WHERE n.status = 'PROCESSING'
), renewed AS (
    UPDATE notifications n
    SET lease_expires_at = clock_timestamp() + $4::int8 * interval '1 millisecond'
    FROM held
    WHERE NOT held.enough AND n.id = held.id AND n.claim_token = held.claim_token
      AND n.status = 'PROCESSING'
    RETURNING n.id
)
SELECT id FROM held WHERE enough
UNION ALL
SELECT id FROM renewed
