-- The provider delivered message $1 at $2 (an SES delivery event): the attempt that sent it
-- gets its delivery time, once; a repeated event finds it set and changes nothing (checked
-- on the row itself, so two copies of one event racing still write once). Returns how many
-- attempts changed and the notification that sent the message, if any attempt has its id.
WITH matched AS (
    SELECT id, notification_id FROM delivery_attempts WHERE provider_message_id = $1
), marked AS (
    UPDATE delivery_attempts d
    SET delivered_at = $2
    FROM matched m
    -- By the whole key (V28): the attempt's number alone is in no index.
    WHERE d.notification_id = m.notification_id AND d.id = m.id AND d.delivered_at IS NULL
    RETURNING d.id
)
SELECT (SELECT count(*) FROM marked) AS marked,
       (SELECT notification_id FROM matched ORDER BY id DESC LIMIT 1) AS notification_id
