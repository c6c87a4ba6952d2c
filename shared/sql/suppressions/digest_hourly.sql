-- Provider-reported suppressions (bounces, complaints, invalid recipients) per channel and
-- reason: in the last hour, and in the $1 hours before it (the baseline). A range of
-- suppressions_listing.
SELECT s.channel, s.reason,
       count(*) FILTER (WHERE s.created_at > now() - interval '1 hour')::int8 AS last_hour,
       count(*) FILTER (WHERE s.created_at <= now() - interval '1 hour')::int8 AS baseline
FROM suppressions s
WHERE s.created_at > now() - interval '1 hour' - $1::int8 * interval '1 hour'
  AND s.reason IN ('BOUNCED', 'COMPLAINED', 'INVALID_RECIPIENT')
GROUP BY s.channel, s.reason
ORDER BY s.channel, s.reason
