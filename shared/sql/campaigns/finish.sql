-- Up to $1 campaigns whose expansion finished and of which nothing is PENDING or
-- PROCESSING any more: QUEUED → DONE, each with its campaign.done webhook event and final
-- counts, in this statement.
WITH done AS (
    UPDATE campaigns c SET status = 'DONE', finished_at = now()
    WHERE c.id IN (SELECT id FROM campaigns WHERE status = 'QUEUED'
                   ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      AND NOT EXISTS (SELECT 1 FROM notifications n
                      WHERE n.payload #>> '{$template,campaign}' = c.id::text
                        AND n.status IN ('PENDING', 'PROCESSING'))
    RETURNING c.id, c.name, c.audience_size, c.expanded
), events AS (
    INSERT INTO webhook_events (id, type, body, occurred_at)
    SELECT gen_random_uuid(), 'campaign.done',
           jsonb_build_object('campaignId', d.id, 'name', d.name, 'status', 'DONE',
                              'audienceSize', d.audience_size, 'expanded', d.expanded,
                              'counts', coalesce((SELECT jsonb_object_agg(s.status, s.n)
                                                  FROM (SELECT n.status, count(*) AS n
                                                        FROM notifications n
                                                        WHERE n.payload #>> '{$template,campaign}' = d.id::text
                                                        GROUP BY n.status) s), '{}'::jsonb)),
           now()
    FROM done d
)
SELECT count(*) AS finished FROM done
