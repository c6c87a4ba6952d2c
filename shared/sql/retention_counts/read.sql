-- Rows deleted by the retention step so far, per table.
SELECT coalesce(sum(deleted) FILTER (WHERE kind = 'notifications'), 0)::int8 AS notifications,
       coalesce(sum(deleted) FILTER (WHERE kind = 'webhook_events'), 0)::int8 AS webhook_events
FROM retention_counts
