-- The re-check at send, once per claimed batch inside the start fence's transaction: of
-- the claims held ($1 ids, $2 tokens; $3 the keyed hash of each one's address), those
-- that expired since the claim become EXPIRED, and those whose person changed their mind
-- since enqueue become SUPPRESSED, with the enqueue rules' reasons and order: a suppressed
-- address; bulk to someone unsubscribed from everything; a category opt-out. Neither
-- spends an attempt; each gets its webhook event in this statement. A claim whose person
-- was erased since it was claimed is CANCELLED, as erasure cancels what is PENDING: the
-- address this worker holds in memory is not used. Returns the ids stopped with their new
-- status and reason.
WITH claim AS (
    SELECT n.id, n.recipient, n.channel, n.class, n.category, n.recipient_id, n.expires_at,
           coalesce(n.owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid) AS owner,
           mine.hash
    FROM notifications n
    JOIN unnest($1::uuid[], $2::uuid[], $3::text[]) AS mine(id, token, hash)
      ON n.id = mine.id AND n.claim_token = mine.token
    WHERE n.status = 'PROCESSING'
), verdict AS (
    SELECT c.id, CASE
        WHEN c.recipient = '[erased]' THEN 'ERASED'
        WHEN c.expires_at <= clock_timestamp() THEN 'EXPIRED'
        WHEN EXISTS (SELECT 1 FROM suppressions s
                     WHERE s.channel = c.channel AND s.address_hash = c.hash)
            THEN 'SUPPRESSED_ADDRESS'
        WHEN c.class = 'BULK' AND c.recipient_id IS NOT NULL AND (
                EXISTS (SELECT 1 FROM recipients r
                        WHERE r.owner = c.owner AND r.recipient_id = c.recipient_id
                          AND r.unsubscribed_all)
             OR EXISTS (SELECT 1 FROM recipient_preferences p
                        WHERE p.owner = c.owner AND p.recipient_id = c.recipient_id
                          AND p.category = '*' AND p.channel = c.channel AND NOT p.opted_in))
            THEN 'UNSUBSCRIBED'
        WHEN c.recipient_id IS NOT NULL AND EXISTS (
                SELECT 1 FROM recipient_preferences p
                WHERE p.owner = c.owner AND p.recipient_id = c.recipient_id
                  AND p.category = c.category AND p.channel = c.channel AND NOT p.opted_in)
            THEN 'CATEGORY_OPT_OUT'
        END AS verdict
    FROM claim c
), stopped AS (
    UPDATE notifications n
    SET status = CASE v.verdict WHEN 'EXPIRED' THEN 'EXPIRED' WHEN 'ERASED' THEN 'CANCELLED'
                                ELSE 'SUPPRESSED' END,
        expired_at = CASE WHEN v.verdict = 'EXPIRED' THEN now() END,
        cancelled_at = CASE WHEN v.verdict = 'ERASED' THEN now() END,
        suppressed_at = CASE WHEN v.verdict NOT IN ('EXPIRED', 'ERASED') THEN now() END,
        suppressed_reason = CASE WHEN v.verdict NOT IN ('EXPIRED', 'ERASED') THEN v.verdict END,
        attempt_count = n.attempt_count - 1,
        claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
    FROM verdict v
    WHERE n.id = v.id AND v.verdict IS NOT NULL
    RETURNING n.id, n.status, n.suppressed_reason, n.attempt_count, n.redrive_count
), events AS (
    INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                redrive_generation, occurred_at)
    SELECT gen_random_uuid(), 'notification.' || lower(status), id, status, attempt_count,
           redrive_count, now()
    FROM stopped WHERE status <> 'CANCELLED'
    ON CONFLICT (notification_id, status, redrive_generation) DO NOTHING
)
SELECT id, status, suppressed_reason FROM stopped
