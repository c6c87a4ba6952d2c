-- The reservations of recipients $1 inside the window of $2 ms, and the database clock:
-- always at least one row, whose reservation columns are NULL when there is none.
-- Expired reservations of these recipients are deleted on the way.
WITH pruned AS (
    DELETE FROM rate_limit_reservations
    WHERE recipient = ANY($1) AND reserved_at <= now() - $2::int8 * interval '1 millisecond'
)
SELECT now() AS now, r.recipient, r.notification_id, r.reserved_at
FROM (SELECT 1) AS clock
LEFT JOIN rate_limit_reservations r
       ON r.recipient = ANY($1) AND r.reserved_at > now() - $2::int8 * interval '1 millisecond'
