-- The notifications of the campaigns $1 (their ids as text) by campaign and status, for a
-- page of campaigns at once: the sum of each campaign's shard rows, statuses at 0 left out.
SELECT campaign, status, sum(notifications)::int8 AS n
FROM campaign_counts
WHERE campaign = ANY($1::text[])
GROUP BY campaign, status
HAVING sum(notifications) <> 0
