-- The reservations of recipients $1 inside the window of $2 ms, and the database clock:
-- always at least one row, whose reservation columns are NULL when there is none. A
-- reservation is filed under the recipient's hash (the key lock_recipients locks) and
-- read back beside the recipient it was asked for. Expired reservations of these
-- recipients are deleted on the way.
WITH asked AS (
    SELECT DISTINCT recipient, hashtextextended(recipient, 0) AS recipient_key
    FROM unnest($1::text[]) AS a(recipient)
), pruned AS (
    DELETE FROM rate_limit_reservations
    WHERE recipient_key = ANY (ARRAY(SELECT recipient_key FROM asked))
      AND reserved_at <= now() - $2::int8 * interval '1 millisecond'
)
SELECT now() AS now, live.recipient, live.notification_id, live.reserved_at
FROM (SELECT 1) AS clock
LEFT JOIN (
    SELECT a.recipient, r.notification_id, r.reserved_at
    FROM asked a
    JOIN rate_limit_reservations r
      ON r.recipient_key = a.recipient_key
     AND r.reserved_at > now() - $2::int8 * interval '1 millisecond'
) AS live ON true
