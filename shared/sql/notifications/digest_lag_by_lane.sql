-- Per channel and priority, the oldest due PENDING notification's due time, for the lanes
-- that have one due: one probe of queue_claim_order per (channel, class, priority).
SELECT c.channel, p.priority, min(o.due) AS oldest_due,
       extract(epoch FROM now() - min(o.due))::float8 AS lag_seconds
FROM (VALUES ('EMAIL'), ('SMS'), ('PUSH')) AS c (channel)
CROSS JOIN (VALUES ('TRANSACTIONAL'), ('BULK')) AS k (class)
CROSS JOIN (VALUES (0::int2), (1::int2), (2::int2)) AS p (priority)
CROSS JOIN LATERAL (
    SELECT q.next_attempt_at AS due
    FROM queue q
    WHERE q.status = 'PENDING' AND q.channel = c.channel AND q.class = k.class
      AND q.priority = p.priority
    ORDER BY q.next_attempt_at
    LIMIT 1
) AS o
WHERE o.due <= now()
GROUP BY c.channel, p.priority
ORDER BY c.channel, p.priority
