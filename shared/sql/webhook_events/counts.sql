-- Outbox totals for metrics: waiting or being sent, delivered, given up.
SELECT count(*) FILTER (WHERE dispatch_state IN ('PENDING', 'DISPATCHING')) AS pending,
       count(*) FILTER (WHERE dispatch_state = 'DELIVERED') AS delivered,
       count(*) FILTER (WHERE dispatch_state = 'GIVEN_UP') AS given_up
FROM webhook_events
