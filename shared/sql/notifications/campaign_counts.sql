-- The notifications of campaign $1 (its id as text) by status; served by
-- notifications_by_campaign.
SELECT status, count(*) AS n FROM notifications
WHERE payload #>> '{$template,campaign}' = $1
GROUP BY status
