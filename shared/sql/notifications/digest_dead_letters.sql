-- Notifications dead-lettered in the last $1 seconds and in the $1 seconds before: how
-- many, the five most frequent error texts and the channels. Reads the dead letters
-- through queue_list_waiting (the queue holds every DEAD_LETTERED notification until
-- it is redriven or retention deletes it), never the whole table.
WITH recent AS (
    SELECT n.channel, coalesce(left(n.last_error, 200), '') AS error
    FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.status = 'DEAD_LETTERED' AND n.status = 'DEAD_LETTERED'
      AND n.dead_lettered_at > now() - $1::int8 * interval '1 second'
), errors AS (
    SELECT error, count(*) AS count FROM recent GROUP BY error ORDER BY count DESC, error LIMIT 5
), channels AS (
    SELECT channel, count(*) AS count FROM recent GROUP BY channel ORDER BY count DESC, channel
)
SELECT (SELECT count(*) FROM recent)::int8 AS count,
       (SELECT count(*) FROM queue q JOIN notifications n ON n.id = q.id
        WHERE q.status = 'DEAD_LETTERED' AND n.status = 'DEAD_LETTERED'
          AND n.dead_lettered_at > now() - 2 * $1::int8 * interval '1 second'
          AND n.dead_lettered_at <= now() - $1::int8 * interval '1 second')::int8 AS previous,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('error', error, 'count', count)
                                  ORDER BY count DESC, error), '[]'::jsonb) FROM errors) AS top_errors,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('channel', channel, 'count', count)
                                  ORDER BY count DESC, channel), '[]'::jsonb) FROM channels) AS channels
