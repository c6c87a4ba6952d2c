-- Outbox totals for metrics (waiting or being sent, delivered, given up), from the counts
-- the triggers of migration V7 keep.
SELECT coalesce(sum(events) FILTER (WHERE dispatch_state IN ('PENDING', 'DISPATCHING')), 0)::int8 AS pending,
       coalesce(sum(events) FILTER (WHERE dispatch_state = 'DELIVERED'), 0)::int8 AS delivered,
       coalesce(sum(events) FILTER (WHERE dispatch_state = 'GIVEN_UP'), 0)::int8 AS given_up
FROM webhook_event_counts
