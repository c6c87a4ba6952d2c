-- The tables of a notification's life that are due a vacuum now: more dead rows than
-- 1,000 + a fifth of the live ones (autovacuum's own rule), and fewer than $1 rows in all,
-- so that one vacuum is short. Autovacuum looks at a database once a minute
-- (autovacuum_naptime); a table that retention of seconds and the drain turn over within
-- that minute grows by the minute's dead rows before it looks, so retention asks every
-- step. Larger tables are left to autovacuum: a minute of deletes is a small part of them.
SELECT relname::text AS table_name
FROM pg_stat_user_tables
WHERE schemaname = current_schema()
  AND relname IN ('notifications', 'queue', 'delivery_attempts', 'webhook_events',
                  'rate_limit_reservations', 'simulated_deliveries')
  AND n_dead_tup > 1000 + 0.2 * n_live_tup
  AND n_live_tup + n_dead_tup < $1
ORDER BY n_dead_tup DESC
