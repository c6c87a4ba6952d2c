-- Per channel and priority, the oldest due PENDING notification's due time, for the lanes
-- that have one due: one probe of notifications_claim_order per (channel, class, priority).
SELECT c.channel, p.priority, min(o.due) AS oldest_due,
       extract(epoch FROM now() - min(o.due))::float8 AS lag_seconds
FROM (VALUES ('EMAIL'), ('SMS'), ('PUSH')) AS c (channel)
CROSS JOIN (VALUES ('TRANSACTIONAL'), ('BULK')) AS k (class)
CROSS JOIN (VALUES (0::int2), (1::int2), (2::int2)) AS p (priority)
CROSS JOIN LATERAL (
    SELECT n.next_attempt_at AS due
    FROM notifications n
    WHERE n.status = 'PENDING' AND n.channel = c.channel AND n.class = k.class
      AND n.priority = p.priority
    ORDER BY n.next_attempt_at
    LIMIT 1
) AS o
WHERE o.due <= now()
GROUP BY c.channel, p.priority
ORDER BY c.channel, p.priority
