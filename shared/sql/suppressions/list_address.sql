-- The entries of one address: the (channel $1, hash $2) pairs it may be listed under, each
-- found by the primary key (a filter on the listing above would walk the whole list);
-- newest first, strictly after the position ($3 created at, $4 channel, $5 hash); $6 rows.
SELECT s.channel, s.address_hash, s.address, s.reason, s.created_at
FROM unnest($1::text[], $2::text[]) AS listed (channel, address_hash)
JOIN suppressions s ON s.channel = listed.channel AND s.address_hash = listed.address_hash
WHERE (s.created_at, s.channel, s.address_hash) < ($3, $4, $5)
ORDER BY s.created_at DESC, s.channel DESC, s.address_hash DESC
LIMIT $6
