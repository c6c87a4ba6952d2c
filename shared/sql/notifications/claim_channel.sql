-- Claims up to $2 due notifications of channel $1 (of them at most $5 bulk) for worker $3
-- with a lease of $4 ms,
-- in claim order: HIGH, then NORMAL, then LOW (transactional before bulk within one
-- priority); within those the longest-due first, then the oldest. Each (class, priority)
-- is read from the top of the partial index queue_claim_order, so future and finished
-- rows, and other channels' rows, are never scanned; an expired one is left to the expiry
-- step. The queue row and the notification row are both locked with SKIP LOCKED: a
-- cancel or a redrive holding the notification is passed over, never waited for (they
-- lock the notification first and the queue row second, through the trigger). The
-- attempt is counted here, so a notification that crashes every worker still runs out
-- of attempts. The queue row follows the update (trigger queue_follows_update). Commits
-- on its own: no lock outlives it. (Channels whose provider is paced are claimed with
-- claim_paced instead.)
-- The update finds the picked rows by primary key (`= ANY (ARRAY(...))`). Joined to
-- the picked set, it let the planner guess a tenth of the due rows from the LIMIT
-- expressions, and once statistics showed a backlog it read the whole notifications
-- table for a hash join on every claim (100,000 rows: 57-97 ms against 2.9-4.3 ms).
WITH ht AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'TRANSACTIONAL' AND q.priority = 0 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT $2 FOR UPDATE OF q, n SKIP LOCKED
),
hb AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'BULK' AND q.priority = 0 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT least($2 - (SELECT count(*) FROM ht), greatest($5::int8, 0)) FOR UPDATE OF q, n SKIP LOCKED
),
nt AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'TRANSACTIONAL' AND q.priority = 1 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT $2 - (SELECT count(*) FROM ht) - (SELECT count(*) FROM hb) FOR UPDATE OF q, n SKIP LOCKED
),
nb AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'BULK' AND q.priority = 1 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT least($2 - (SELECT count(*) FROM ht) - (SELECT count(*) FROM hb) - (SELECT count(*) FROM nt),
                greatest($5::int8 - (SELECT count(*) FROM hb), 0)) FOR UPDATE OF q, n SKIP LOCKED
),
lt AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'TRANSACTIONAL' AND q.priority = 2 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT $2 - (SELECT count(*) FROM ht) - (SELECT count(*) FROM hb) - (SELECT count(*) FROM nt) - (SELECT count(*) FROM nb) FOR UPDATE OF q, n SKIP LOCKED
),
lb AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'BULK' AND q.priority = 2 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT least($2 - (SELECT count(*) FROM ht) - (SELECT count(*) FROM hb) - (SELECT count(*) FROM nt) - (SELECT count(*) FROM nb) - (SELECT count(*) FROM lt),
                greatest($5::int8 - (SELECT count(*) FROM hb) - (SELECT count(*) FROM nb), 0)) FOR UPDATE OF q, n SKIP LOCKED
), picked AS (
    SELECT id FROM ht UNION ALL SELECT id FROM hb UNION ALL SELECT id FROM nt
    UNION ALL SELECT id FROM nb UNION ALL SELECT id FROM lt UNION ALL SELECT id FROM lb
)
UPDATE notifications n
SET status = 'PROCESSING', claim_token = gen_random_uuid(), claimed_by = $3,
    lease_expires_at = now() + $4::int8 * interval '1 millisecond',
    attempt_count = n.attempt_count + 1, updated_at = now()
WHERE n.id = ANY (ARRAY(SELECT id FROM picked))
RETURNING n.id, n.claim_token, n.recipient, n.channel, n.class, n.priority, n.payload,
          n.attempt_count, n.max_attempts, n.next_attempt_at, n.created_at, n.category,
          n.recipient_id, n.owner_key_id,
          -- How long it may still be handed to the provider, on the clock of the
          -- statement (a transaction's now() may be older: it may have waited).
          floor(extract(epoch FROM n.expires_at - clock_timestamp()) * 1000)::int8
              AS expires_in_ms
