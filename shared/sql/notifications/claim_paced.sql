-- Claims due notifications of a paced channel $1 (up to $2, of them at most $5 bulk) for
-- worker $3 with a lease of $4 ms, never more than the channel's token buckets hold, and
-- takes the tokens in the same statement: 50 sweepers share one honest budget. Each bucket is refilled for the
-- time since it was last touched (rate per second, up to its burst). Transactional work
-- uses its own tokens; bulk work the bulk bucket's; what bulk work leaves of those,
-- transactional work may borrow (it borrows unused bulk budget, never bulk's share).
-- A channel without a rate is not limited by tokens. A paused channel claims nothing; an open circuit claims nothing until it has been open
-- long enough, then one probe (HALF_OPEN, held for the lease). Transactional work is
-- claimed before bulk work within each one's tokens, each by priority, then the
-- longest-due, then the oldest; borrowed tokens go to the transactional work next in
-- that order.
WITH health AS (
    SELECT (paused_until IS NOT NULL AND paused_until > now()) AS paused,
           circuit, circuit_until
    FROM channel_health WHERE channel = $1
    FOR UPDATE
), cap AS (
    SELECT CASE
        WHEN health.paused THEN 0
        WHEN health.circuit = 'CLOSED' THEN $2::int8
        -- OPEN and its time is up, or HALF_OPEN whose probe was not answered in time.
        WHEN health.circuit_until <= now() THEN 1
        ELSE 0 END AS cap
    FROM health
), buckets AS (
    -- The refill is counted up to `at`, and the bucket is stamped `at`, not a later clock:
    -- time that passed while this statement ran would otherwise never be refilled, and
    -- back-to-back claims would leave the bucket empty for good.
    SELECT class, at, least(burst, tokens + rate * greatest(
               extract(epoch FROM at - refilled_at)::float8, 0)) AS available
    FROM (SELECT class, burst, tokens, rate, refilled_at, clock_timestamp() AS at
          FROM token_buckets WHERE channel = $1
          FOR UPDATE) AS locked
), tokens AS (
    -- Whole tokens per class; a channel without buckets (no rate set) is not limited.
    SELECT cap.cap,
           CASE WHEN count(buckets.class) = 0 THEN cap.cap
                ELSE coalesce(max(floor(available)) FILTER (WHERE class = 'TRANSACTIONAL'), 0)
           END::int8 AS own,
           CASE WHEN count(buckets.class) = 0 THEN cap.cap
                ELSE coalesce(max(floor(available)) FILTER (WHERE class = 'BULK'), 0)
           END::int8 AS bulk
    FROM cap LEFT JOIN buckets ON true
    GROUP BY cap.cap
), budget AS (
    SELECT cap, own, bulk, least(cap, own) AS transactional FROM tokens
), ht AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'TRANSACTIONAL' AND q.priority = 0 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT greatest(coalesce((SELECT transactional FROM budget), 0), 0) FOR UPDATE OF q, n SKIP LOCKED
),
nt AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'TRANSACTIONAL' AND q.priority = 1 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT greatest(coalesce((SELECT transactional FROM budget), 0) - (SELECT count(*) FROM ht), 0) FOR UPDATE OF q, n SKIP LOCKED
),
lt AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'TRANSACTIONAL' AND q.priority = 2 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT greatest(coalesce((SELECT transactional FROM budget), 0) - (SELECT count(*) FROM ht) - (SELECT count(*) FROM nt), 0) FOR UPDATE OF q, n SKIP LOCKED
),
taken AS (
    SELECT (SELECT count(*) FROM ht) + (SELECT count(*) FROM nt) + (SELECT count(*) FROM lt) AS transactional
), bulk_budget AS (
    -- What bulk work may take: its tokens, within what the cap leaves and $5.
    SELECT least(bulk, cap - taken.transactional, $5::int8) AS most
    FROM budget, taken
),
hb AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'BULK' AND q.priority = 0 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT greatest(coalesce((SELECT most FROM bulk_budget), 0), 0) FOR UPDATE OF q, n SKIP LOCKED
),
nb AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'BULK' AND q.priority = 1 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT greatest(coalesce((SELECT most FROM bulk_budget), 0) - (SELECT count(*) FROM hb), 0) FOR UPDATE OF q, n SKIP LOCKED
),
lb AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'BULK' AND q.priority = 2 AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
    ORDER BY q.next_attempt_at, q.created_at
    LIMIT greatest(coalesce((SELECT most FROM bulk_budget), 0) - (SELECT count(*) FROM hb) - (SELECT count(*) FROM nb), 0) FOR UPDATE OF q, n SKIP LOCKED
), borrow_budget AS (
    -- The bulk tokens bulk work left unused, within what the cap leaves.
    SELECT least(bulk - bulk_taken, cap - taken.transactional - bulk_taken) AS most
    FROM budget, taken,
         (SELECT (SELECT count(*) FROM hb) + (SELECT count(*) FROM nb)
                 + (SELECT count(*) FROM lb) AS bulk_taken) AS b
),
borrowed AS (
    -- Transactional work past its own tokens, in claim order; the rows of ht, nt and lt
    -- are left out by id (a statement's own row locks do not make SKIP LOCKED skip them).
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.channel = $1 AND q.class = 'TRANSACTIONAL' AND q.status = 'PENDING'
      AND q.next_attempt_at <= now() AND (q.expires_at IS NULL OR q.expires_at > now())
      AND n.status = 'PENDING'
      AND q.id <> ALL (ARRAY(SELECT id FROM ht UNION ALL SELECT id FROM nt
                             UNION ALL SELECT id FROM lt))
    ORDER BY q.priority, q.next_attempt_at, q.created_at
    LIMIT greatest(coalesce((SELECT most FROM borrow_budget), 0), 0) FOR UPDATE OF q, n SKIP LOCKED
), picked AS (
    SELECT id FROM ht UNION ALL SELECT id FROM nt UNION ALL SELECT id FROM lt
    UNION ALL SELECT id FROM hb UNION ALL SELECT id FROM nb UNION ALL SELECT id FROM lb
    UNION ALL SELECT id FROM borrowed
), claimed AS (
    -- By primary key, as in claim_channel.sql: a join to picked read the whole table
    -- once statistics showed a backlog.
    UPDATE notifications n
    SET status = 'PROCESSING', claim_token = gen_random_uuid(), claimed_by = $3,
        lease_expires_at = now() + $4::int8 * interval '1 millisecond',
        attempt_count = n.attempt_count + 1, updated_at = now()
    WHERE n.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING n.id, n.claim_token, n.recipient, n.channel, n.class, n.priority, n.payload,
              n.attempt_count, n.max_attempts, n.next_attempt_at, n.created_at, n.category,
              n.recipient_id, n.owner_key_id,
              -- How long it may still be handed to the provider, on the clock of the
              -- statement (the transaction's now() is older: it waited for the channel).
              floor(extract(epoch FROM n.expires_at - clock_timestamp()) * 1000)::int8
                  AS expires_in_ms
), spent AS (
    -- Transactional work spends its own tokens; bulk work and borrowing, bulk tokens.
    SELECT taken.transactional AS own,
           (SELECT count(*) FROM claimed WHERE class = 'BULK')
             + (SELECT count(*) FROM borrowed) AS bulk
    FROM taken
), refilled AS (
    UPDATE token_buckets b
    SET tokens = buckets.available - CASE WHEN b.class = 'TRANSACTIONAL' THEN spent.own
                                          ELSE spent.bulk END,
        refilled_at = greatest(buckets.at, b.refilled_at)
    FROM buckets, spent
    WHERE b.channel = $1 AND b.class = buckets.class
), probing AS (
    -- A probe was granted: the circuit is HALF_OPEN until the probe's lease runs out.
    UPDATE channel_health h
    SET circuit = 'HALF_OPEN', circuit_since = now(),
        circuit_until = now() + $4::int8 * interval '1 millisecond'
    FROM health
    WHERE h.channel = $1 AND health.circuit <> 'CLOSED' AND NOT health.paused
      AND health.circuit_until <= now() AND EXISTS (SELECT 1 FROM claimed)
)
-- `probe`: these rows are the probe of a circuit that was OPEN (the sweeper logs its move
-- to HALF_OPEN; a new probe of a circuit already HALF_OPEN changes no state).
SELECT claimed.*, health.circuit = 'OPEN' AS probe FROM claimed, health
