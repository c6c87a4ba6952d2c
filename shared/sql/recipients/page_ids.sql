-- The next $3 recipient ids of owner $1 after $2 ('' from the first: every id has at least
-- one character), in key order: a campaign of every profile walks them with this keyset.
-- No "$2 IS NULL OR" here: a generic plan cannot start an index range at a bound that may
-- be absent, and would read the owner's ids from the first on every page.
SELECT recipient_id FROM recipients
WHERE owner = $1 AND recipient_id > $2
ORDER BY recipient_id
LIMIT $3
