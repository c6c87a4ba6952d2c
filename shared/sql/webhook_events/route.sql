-- Decides where up to $1 new events go, oldest first. An event of a notification, or a
-- campaign's campaign.done, goes to every endpoint of the client that created it (the nil
-- key: work created without a key); an event of neither (a circuit change) to the
-- operators' endpoints. Of
-- those, only endpoints subscribed to the event's type: the row itself takes the first,
-- a copy carrying the same event_id is written for each other one.
--
-- With no endpoint at all the row goes to the default URL when one is configured ($2).
-- Work created without a key goes to the default URL whenever one is configured: it is
-- that work's own destination, and an endpoint registered without a key (a local runner
-- has no keys) is served beside it, by a copy, not instead of it. Otherwise nothing is
-- sent: the row is closed as DELIVERED with no attempt, last_error $3 when endpoints
-- exist but none subscribes to the type, $4 when there is none and no default URL either.
WITH batch AS (
    SELECT e.id, e.type, e.notification_id, e.status, e.attempt_count, e.body, e.occurred_at,
           coalesce(n.owner_key_id, c.owner, '00000000-0000-0000-0000-000000000000'::uuid)
               AS owner,
           e.notification_id IS NULL AND c.id IS NULL AS to_operators,
           $2 AND ((e.notification_id IS NOT NULL AND n.owner_key_id IS NULL)
                   OR c.owner IS NOT DISTINCT FROM '00000000-0000-0000-0000-000000000000'::uuid)
               AS to_default
    FROM webhook_events e
    LEFT JOIN notifications n ON n.id = e.notification_id
    LEFT JOIN campaigns c
           ON e.type = 'campaign.done' AND c.id = (e.body ->> 'campaignId')::uuid
    WHERE e.routed_at IS NULL AND e.dispatch_state = 'PENDING' AND e.next_dispatch_at <= now()
    ORDER BY e.next_dispatch_at
    LIMIT $1
    FOR UPDATE OF e SKIP LOCKED
),
candidates AS (
    SELECT b.id, w.id AS endpoint_id, w.created_at,
           w.event_types IS NULL OR b.type = ANY (w.event_types) AS subscribed
    FROM batch b
    JOIN webhook_endpoints w
      ON CASE WHEN b.to_operators THEN w.operator ELSE w.owner_key_id = b.owner END
),
targets AS (
    SELECT id, endpoint_id,
           row_number() OVER (PARTITION BY id ORDER BY created_at, endpoint_id) AS rank
    FROM candidates
    WHERE subscribed
),
copies AS (
    INSERT INTO webhook_events (id, type, body, occurred_at, event_id, endpoint_id, routed_at)
    SELECT gen_random_uuid(), b.type,
           coalesce(b.body, jsonb_build_object('jobId', b.notification_id, 'status', b.status,
                                               'attemptCount', b.attempt_count)),
           b.occurred_at, b.id, t.endpoint_id, now()
    FROM targets t
    JOIN batch b ON b.id = t.id
    WHERE t.rank > 1 OR b.to_default
    RETURNING id
),
decisions AS (
    SELECT b.id, CASE WHEN b.to_default THEN NULL ELSE t.endpoint_id END AS endpoint_id,
           b.to_default,
           EXISTS (SELECT 1 FROM candidates c WHERE c.id = b.id) AS has_endpoints
    FROM batch b
    LEFT JOIN targets t ON t.id = b.id AND t.rank = 1
)
UPDATE webhook_events e
SET endpoint_id = d.endpoint_id,
    routed_at = now(),
    dispatch_state = CASE WHEN d.closed THEN 'DELIVERED' ELSE e.dispatch_state END,
    delivered_at = CASE WHEN d.closed THEN now() END,
    last_error = CASE WHEN NOT d.closed THEN e.last_error
                      WHEN d.has_endpoints THEN $3 ELSE $4 END
FROM (SELECT id, endpoint_id, has_endpoints,
             endpoint_id IS NULL AND NOT to_default AND (has_endpoints OR NOT $2) AS closed
      FROM decisions) d
-- Also by primary key, as in webhook_events/claim.sql.
WHERE e.id = d.id AND e.id = ANY (ARRAY(SELECT id FROM batch))
RETURNING e.id, e.endpoint_id, d.closed, d.has_endpoints,
          (SELECT count(*) FROM copies) AS copies
