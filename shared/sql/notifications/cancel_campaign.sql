-- PENDING → CANCELLED for up to $2 notifications of campaign $1 (its id as text). Rows a
-- sweeper is claiming are waited for, then skipped when they turned PROCESSING (as in
-- cancel.sql). Returns how many were cancelled; the caller repeats until none.
WITH batch AS (
    SELECT id FROM notifications
    WHERE payload #>> '{$template,campaign}' = $1 AND status = 'PENDING'
    LIMIT $2
    FOR UPDATE
), cancelled AS (
    UPDATE notifications n
    SET status = 'CANCELLED', cancelled_at = now(), updated_at = now()
    -- By primary key, as in claim_channel.sql: a join to batch could read the whole table.
    WHERE n.id = ANY (ARRAY(SELECT id FROM batch)) AND n.status = 'PENDING'
    RETURNING n.id
)
SELECT count(*) AS cancelled FROM cancelled
