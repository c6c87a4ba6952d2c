-- The keys holding a profile named $1, key $2 first if it is one of them (at most two:
-- enough to tell one from several).
SELECT owner FROM recipients WHERE recipient_id = $1 ORDER BY owner = $2 DESC, owner LIMIT 2
