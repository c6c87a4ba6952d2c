-- Merges preferences into profile $2 of owner $1: parallel arrays $3 categories,
-- $4 channels, $5 opted in. Returns nothing when the profile does not exist.
INSERT INTO recipient_preferences AS p (owner, recipient_id, category, channel, opted_in)
SELECT $1, $2, c, ch, o
FROM unnest($3::text[], $4::text[], $5::bool[]) AS u(c, ch, o)
WHERE EXISTS (SELECT 1 FROM recipients WHERE owner = $1 AND recipient_id = $2)
ON CONFLICT (owner, recipient_id, category, channel) DO UPDATE SET opted_in = excluded.opted_in
