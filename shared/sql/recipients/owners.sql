-- The keys (at most two: enough to tell one from several) holding a profile named $1.
SELECT owner FROM recipients WHERE recipient_id = $1 ORDER BY owner LIMIT 2
