-- Age in seconds of the oldest due PENDING notification; 0 when none is due. One probe of
-- queue_claim_order per channel, class and priority (the index leads with the channel).
SELECT coalesce(extract(epoch FROM now() - min(oldest))::float8, 0) AS lag
FROM (VALUES ('EMAIL'), ('SMS'), ('PUSH')) AS c (channel)
CROSS JOIN (VALUES ('TRANSACTIONAL'), ('BULK')) AS k (class)
CROSS JOIN (VALUES (0::smallint), (1::smallint), (2::smallint)) AS p (priority)
CROSS JOIN LATERAL (
    SELECT q.next_attempt_at AS oldest FROM queue q
    WHERE q.channel = c.channel AND q.class = k.class AND q.priority = p.priority
      AND q.status = 'PENDING'
    ORDER BY q.next_attempt_at LIMIT 1
) AS head
WHERE oldest <= now()
