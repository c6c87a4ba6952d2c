-- The notifications of the campaigns $1 (their ids as text) by campaign and status, for a
-- page of campaigns at once; served by notifications_by_campaign.
SELECT payload #>> '{$template,campaign}' AS campaign, status, count(*) AS n
FROM notifications
WHERE payload #>> '{$template,campaign}' = ANY($1::text[])
GROUP BY 1, status
