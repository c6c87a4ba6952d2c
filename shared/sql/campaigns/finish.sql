-- Up to $1 campaigns whose expansion finished and of which nothing is PENDING or
-- PROCESSING any more: QUEUED → DONE, each with its campaign.done webhook event and final
-- counts, in this statement. The counts are the maintained ones (campaign_counts, kept
-- by the triggers on notifications), read in a few rows whatever the campaign's size.
WITH done AS (
    UPDATE campaigns c SET status = 'DONE', finished_at = now()
    WHERE c.id IN (SELECT id FROM campaigns WHERE status = 'QUEUED'
                   ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      AND coalesce((SELECT sum(k.notifications) FROM campaign_counts k
                    WHERE k.campaign = c.id::text AND k.status IN ('PENDING', 'PROCESSING')),
                   0) = 0
    RETURNING c.id, c.name, c.audience_size, c.expanded
), events AS (
    INSERT INTO webhook_events (id, type, body, occurred_at)
    SELECT gen_random_uuid(), 'campaign.done',
           jsonb_build_object('campaignId', d.id, 'name', d.name, 'status', 'DONE',
                              'audienceSize', d.audience_size, 'expanded', d.expanded,
                              'counts', coalesce((SELECT jsonb_object_agg(s.status, s.n)
                                                  FROM (SELECT k.status, sum(k.notifications)::int8 AS n
                                                        FROM campaign_counts k
                                                        WHERE k.campaign = d.id::text
                                                        GROUP BY k.status
                                                        HAVING sum(k.notifications) <> 0) s),
                                                 '{}'::jsonb)),
           now()
    FROM done d
)
SELECT count(*) AS finished FROM done
