-- Notifications per (status, channel, priority), with their summed attempts and
-- deferrals: the sums of the counts the triggers of migration V7 keep, never a scan of
-- the notifications themselves.
SELECT status, channel, priority, sum(notifications)::int8 AS count,
       sum(attempts)::int8 AS attempts, sum(deferrals)::int8 AS deferrals
FROM notification_counts
GROUP BY status, channel, priority
HAVING sum(notifications) <> 0
