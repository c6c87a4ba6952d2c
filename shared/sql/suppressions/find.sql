-- Which of the (channel, keyed hash) pairs $1, $2 are on the suppression list.
SELECT s.channel, s.address_hash
FROM suppressions s
JOIN unnest($1::text[], $2::text[]) AS q(channel, hash)
  ON s.channel = q.channel AND s.address_hash = q.hash
