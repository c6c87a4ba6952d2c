-- Locks the recipients $1 for the rest of the transaction, in ascending key order so that
-- two batches sharing recipients cannot deadlock.
SELECT pg_advisory_xact_lock(key)
FROM (SELECT DISTINCT hashtextextended(r, 0) AS key
      FROM unnest($1::text[]) AS r ORDER BY key) AS keys
