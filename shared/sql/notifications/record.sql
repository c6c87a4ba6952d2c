-- Records a batch of provider results: each row only if still PROCESSING with the token
-- given, clearing the claim. One attempt row per provider call. Final outcomes write their
-- webhook event, and invalid recipients their suppression, in the same statement, so
-- neither exists without the other. Parallel arrays: $1 ids, $2 tokens, $3 new statuses,
-- $4 errors, $5 delays before the next attempt (ms, for PENDING), $6 whether the attempt
-- is refunded (throttled, misconfigured), $7 attempt outcomes, $8 provider message ids,
-- $9 when each call started, $10 when it finished, $11 the keyed hash of the address to
-- suppress (NULL: none); $12 the worker. A notification whose person was erased while
-- it was in flight keeps no error text (a provider may quote the address), its
-- suppression only the hash and the simulated provider's copy neither address nor
-- content; one to be retried whose person was erased or whose campaign was cancelled
-- meanwhile is CANCELLED.
WITH results AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int8[],
                         $6::bool[], $7::text[], $8::text[], $9::timestamptz[],
                         $10::timestamptz[], $11::text[])
        AS r(id, token, status, error, delay_ms, refund, outcome, message_id, started_at,
             finished_at, suppress_hash)
), recorded AS (
    UPDATE notifications n
    -- Due again, but the person was erased or the campaign cancelled while it was in
    -- flight: cancelled, as erasure and a campaign's cancel cancel what waits. Read from
    -- the row being updated, so an erasure that committed meanwhile is seen; the campaign
    -- is looked up only for a retry (its id in a payload is only ever written by its
    -- expansion, so it is a uuid).
    SET status = CASE WHEN r.status <> 'PENDING' THEN r.status
                      WHEN n.recipient = '[erased]' THEN 'CANCELLED'
                      WHEN EXISTS (SELECT 1 FROM campaigns c
                                   WHERE c.id = (n.payload #>> '{$template,campaign}')::uuid
                                     AND c.status = 'CANCELLED') THEN 'CANCELLED'
                      ELSE r.status END,
        cancelled_at = CASE WHEN r.status <> 'PENDING' THEN n.cancelled_at
                            WHEN n.recipient = '[erased]' THEN now()
                            WHEN EXISTS (SELECT 1 FROM campaigns c
                                         WHERE c.id = (n.payload #>> '{$template,campaign}')::uuid
                                           AND c.status = 'CANCELLED') THEN now()
                            ELSE n.cancelled_at END,
        last_error = CASE WHEN n.recipient = '[erased]' THEN NULL ELSE r.error END,
        attempt_count = n.attempt_count - r.refund::int,
        next_attempt_at = CASE WHEN r.status = 'PENDING'
            THEN now() + r.delay_ms * interval '1 millisecond'
            ELSE n.next_attempt_at END,
        provider_message_id = coalesce(r.message_id, n.provider_message_id),
        sent_at = CASE WHEN r.status = 'SENT' THEN now() END,
        failed_at = CASE WHEN r.status = 'FAILED' THEN now() END,
        dead_lettered_at = CASE WHEN r.status = 'DEAD_LETTERED' THEN now() END,
        claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        updated_at = now()
    FROM results r
    WHERE n.id = r.id AND n.claim_token = r.token AND n.status = 'PROCESSING'
    RETURNING n.id, n.status, n.attempt_count, n.redrive_count, n.channel, n.recipient,
              n.recipient = '[erased]' AS erased
), attempts AS (
    INSERT INTO delivery_attempts (notification_id, attempt, worker, started_at, finished_at,
                                   outcome, provider_message_id, error)
    SELECT r.id, rec.attempt_count + r.refund::int, $12, r.started_at, r.finished_at,
           r.outcome, r.message_id, CASE WHEN rec.erased THEN NULL ELSE r.error END
    FROM results r JOIN recorded rec ON rec.id = r.id
), events AS (
    INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                redrive_generation, occurred_at)
    SELECT gen_random_uuid(), 'notification.' || lower(status), id, status, attempt_count,
           redrive_count, now()
    FROM recorded WHERE status IN ('SENT', 'FAILED', 'DEAD_LETTERED')
    ON CONFLICT (notification_id, status, redrive_generation) DO NOTHING
    RETURNING 1
), forgotten AS (
    -- The simulated provider took the message of a person erased since: its copy keeps no
    -- address or content either (the erasure could not see a copy written after it).
    UPDATE simulated_deliveries d SET recipient = '[erased]', content = NULL
    FROM recorded rec WHERE rec.erased AND d.delivery_key = rec.id
), suppressed AS (
    INSERT INTO suppressions (channel, address_hash, address, reason)
    SELECT rec.channel, r.suppress_hash,
           CASE WHEN rec.erased THEN NULL
                WHEN rec.channel = 'EMAIL' THEN lower(trim(rec.recipient))
                ELSE rec.recipient END,
           'INVALID_RECIPIENT'
    FROM results r JOIN recorded rec ON rec.id = r.id
    WHERE r.suppress_hash IS NOT NULL
    ON CONFLICT (channel, address_hash) DO NOTHING
)
SELECT (SELECT count(*) FROM recorded) AS recorded, (SELECT count(*) FROM events) AS events,
       -- The results not recorded because another sweeper took their claims over while
       -- the calls were out (they are its work now). A result this worker recorded on an
       -- earlier try whose answer was lost is not among them when that try committed
       -- before this statement began: its attempt row is there (the sweeper records once
       -- more after a retry that names any). Looked for only when some row was not
       -- recorded.
       CASE WHEN (SELECT count(*) FROM recorded) = cardinality($1::uuid[]) THEN '{}'::uuid[]
            ELSE ARRAY(SELECT r.id FROM results r
                       WHERE NOT EXISTS (SELECT FROM recorded rec WHERE rec.id = r.id)
                         AND NOT EXISTS (SELECT FROM delivery_attempts a
                                         WHERE a.notification_id = r.id AND a.worker = $12
                                           AND a.started_at = r.started_at)) END
           AS taken_over
