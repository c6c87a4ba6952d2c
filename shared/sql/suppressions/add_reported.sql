-- Adds the addresses a provider reported for message $3 (a hard bounce, a complaint) to
-- the suppression list of channel $1 with reason $4: parallel arrays $2 addresses (as
-- compared: email lower-case) and $5 their keyed hashes. An address already listed keeps
-- its first reason, so a repeated report adds nothing. Returns how many were added and
-- the notification that sent the message, if an attempt has its id (for the log).
WITH added AS (
    INSERT INTO suppressions (channel, address_hash, address, reason)
    SELECT $1, hash, address, $4 FROM unnest($2::text[], $5::text[]) AS a(address, hash)
    ON CONFLICT (channel, address_hash) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM added) AS added,
       (SELECT notification_id FROM delivery_attempts
        WHERE provider_message_id = $3
        ORDER BY id DESC LIMIT 1) AS notification_id
