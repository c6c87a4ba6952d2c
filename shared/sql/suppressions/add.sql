-- Adds address $3 of channel $1 (keyed hash $2) with reason $4, unless it is listed
-- already. Returns the entry as it stands and whether this added it.
WITH added AS (
    INSERT INTO suppressions (channel, address_hash, address, reason)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (channel, address_hash) DO NOTHING
    RETURNING channel, address, reason, created_at
)
SELECT channel, address, reason, created_at, true AS added FROM added
UNION ALL
SELECT channel, address, reason, created_at, false FROM suppressions
WHERE channel = $1 AND address_hash = $2 AND NOT EXISTS (SELECT 1 FROM added)
