-- Rows per (status, channel, priority), with their summed attempts and deferrals.
SELECT status, channel, priority, count(*) AS count,
       coalesce(sum(attempt_count), 0)::int8 AS attempts,
       coalesce(sum(rate_limit_deferrals), 0)::int8 AS deferrals
FROM notifications
GROUP BY status, channel, priority
