-- The start fence, just before the provider call: returns the ids of the claims ($1 ids,
-- $2 tokens) this worker still holds, each with the lease it has left in ms. A claim
-- whose lease has less than $3 ms left is renewed to a full lease of $4 ms; the others
-- are only read, so the usual fence writes nothing. The clock is read here
-- (clock_timestamp), not at the start of the transaction: the transaction may have
-- waited on recipient locks before this statement.
WITH held AS (
    SELECT n.id, n.claim_token,
           n.lease_expires_at >= clock_timestamp() + $3::int8 * interval '1 millisecond' AS enough,
           floor(extract(epoch FROM n.lease_expires_at - clock_timestamp()) * 1000)::int8
               AS left_ms
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
SELECT id, left_ms FROM held WHERE enough
UNION ALL
SELECT id, $4::int8 AS left_ms FROM renewed
