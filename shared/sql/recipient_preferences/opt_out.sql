-- A one-click unsubscribe of profile $2 of owner $1 from category $3 (`*`: every bulk
-- category) on channel $4. Returns 1 when the profile exists.
INSERT INTO recipient_preferences (owner, recipient_id, category, channel, opted_in)
SELECT $1, $2, $3, $4, false
WHERE EXISTS (SELECT 1 FROM recipients WHERE owner = $1 AND recipient_id = $2)
ON CONFLICT (owner, recipient_id, category, channel) DO UPDATE SET opted_in = false
RETURNING 1
