-- Deletes up to 10,000 reservations that left the window of $1 ms, whatever the recipient.
DELETE FROM rate_limit_reservations WHERE notification_id IN (
    SELECT notification_id FROM rate_limit_reservations
    WHERE reserved_at <= now() - $1::int8 * interval '1 millisecond' LIMIT 10000)
