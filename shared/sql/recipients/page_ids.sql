-- The next $3 recipient ids of owner $1 after $2 (NULL: from the first), in key order: a
-- campaign of every profile walks them with this keyset.
SELECT recipient_id FROM recipients
WHERE owner = $1 AND ($2::text IS NULL OR recipient_id > $2)
ORDER BY recipient_id
LIMIT $3
