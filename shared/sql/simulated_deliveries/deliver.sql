-- The simulated provider's idempotency store, for a batch ($1 keys, $2 channels,
-- $3 recipients, $4 whether to store a new key, $5 when each call took the message, $6 the
-- rendered fields of a template notification, NULL for a literal payload). A key already
-- stored counts one more call and is "already delivered"; a new key is stored when asked.
-- Returns per key whether it was already there and whether this call stored it.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bool[], $5::timestamptz[],
                         $6::jsonb[])
        AS i(key, channel, recipient, store, taken_at, content)
), seen AS (
    UPDATE simulated_deliveries d SET calls = d.calls + 1
    FROM input WHERE d.delivery_key = input.key
    RETURNING d.delivery_key
), stored AS (
    INSERT INTO simulated_deliveries (delivery_key, channel, recipient, first_delivered_at, content)
    SELECT key, channel, recipient, taken_at, content FROM input
    WHERE store AND key NOT IN (SELECT delivery_key FROM seen)
    ON CONFLICT (delivery_key) DO NOTHING
    RETURNING delivery_key
)
SELECT input.key,
       input.key IN (SELECT delivery_key FROM seen) AS already,
       input.key IN (SELECT delivery_key FROM stored) AS stored
FROM input
