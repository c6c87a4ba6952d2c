-- Records admissions: one row per notification ($1 ids, $2 recipients, filed under their
-- hash), reserved now. A notification that held a reservation already takes the new time.
INSERT INTO rate_limit_reservations (notification_id, recipient_key, reserved_at)
SELECT id, hashtextextended(recipient, 0), now()
FROM unnest($1::uuid[], $2::text[]) AS r(id, recipient)
ON CONFLICT (notification_id)
DO UPDATE SET recipient_key = EXCLUDED.recipient_key, reserved_at = EXCLUDED.reserved_at
