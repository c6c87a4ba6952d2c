-- A one-click unsubscribe of profile $2 of owner $1 from category $3 (`*`: every bulk
-- category) on channel $4. Stored whether or not the profile exists now: it applies from
-- the moment it does (V24).
INSERT INTO recipient_preferences (owner, recipient_id, category, channel, opted_in)
VALUES ($1, $2, $3, $4, false)
ON CONFLICT (owner, recipient_id, category, channel) DO UPDATE SET opted_in = false
