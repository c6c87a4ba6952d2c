-- How many notifications match the redrive filter ($1 status, $2 recipient, $3 channel,
-- $4 error text, $5 created before, $6 created after; NULL = any), leaving out those
-- whose person was erased, as the redrive does.
-- The status is FAILED or DEAD_LETTERED: read from queue_list_waiting.
SELECT count(*)
FROM queue q JOIN notifications n ON n.id = q.id
WHERE q.status = $1 AND q.status <> 'PROCESSING' AND n.status = $1
      AND ($2::text IS NULL OR n.recipient = $2) AND n.recipient <> '[erased]'
      AND ($3::text IS NULL OR n.channel = $3)
      AND ($4::text IS NULL OR strpos(lower(coalesce(n.last_error, '')), lower($4)) > 0)
      AND ($5::timestamptz IS NULL OR n.created_at < $5)
      AND ($6::timestamptz IS NULL OR n.created_at > $6)
