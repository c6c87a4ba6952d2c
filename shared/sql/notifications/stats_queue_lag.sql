-- Age in seconds of the oldest due PENDING notification; 0 when none is due. One probe of
-- notifications_claim_order per priority.
SELECT coalesce(extract(epoch FROM now() - least(
    (SELECT min(next_attempt_at) FROM notifications WHERE status = 'PENDING' AND priority = 0),
    (SELECT min(next_attempt_at) FROM notifications WHERE status = 'PENDING' AND priority = 1),
    (SELECT min(next_attempt_at) FROM notifications WHERE status = 'PENDING' AND priority = 2)
))::float8, 0) AS lag
