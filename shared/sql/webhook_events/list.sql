-- Events newest first, keyset-paged on (created_at, id) after ($5, $6): only rows of the
-- endpoints of owner $1 when given (a client), of endpoint $2 when given, in dispatch
-- state $3 when given; $4 rows.
SELECT coalesce(e.event_id, e.id) AS event_id, e.id, e.type, e.dispatch_state,
       e.dispatch_attempts, e.endpoint_id, e.created_at, e.last_error
FROM webhook_events e
LEFT JOIN webhook_endpoints w ON w.id = e.endpoint_id
WHERE ($1::uuid IS NULL OR (e.endpoint_id IS NOT NULL AND w.owner_key_id = $1))
  AND ($2::uuid IS NULL OR e.endpoint_id = $2)
  AND ($3::text IS NULL OR e.dispatch_state = $3)
  AND ($5::timestamptz IS NULL OR (e.created_at, e.id) < ($5, $6::uuid))
ORDER BY e.created_at DESC, e.id DESC
LIMIT $4
