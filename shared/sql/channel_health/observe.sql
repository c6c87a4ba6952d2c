-- After a batch of channel $1 went through its real provider: counts its $2 calls and $3
-- temporary failures in the circuit breaker's window, pauses the channel until $8 (NULL:
-- no pause; reason $9) and moves the circuit:
--   CLOSED → OPEN when temporary failures are at least $4 of at least $5 calls in the
--     last $6 seconds (counted since the circuit last changed);
--   HALF_OPEN (a probe was sent) → CLOSED when the provider answered it ($10 answers: a
--     delivery or a rejection of the message itself), → OPEN when it failed; a probe that
--     was throttled or refused for the account's configuration says neither, and the
--     next probe may be claimed once the channel's pause is over.
-- An OPEN circuit stays open $7 seconds. Every change to OPEN or CLOSED writes a webhook
-- event (circuit.opened, circuit.closed). A pause that begins while the channel is not
-- paused starts now; one that lengthens a running pause keeps its start. The batch's
-- throttled ($11) and misconfiguration-refused ($12) calls are added to the channel's
-- running totals. Returns the state before and after.
WITH counted AS (
    INSERT INTO channel_calls AS c (channel, second, calls, temporary)
    VALUES ($1, date_trunc('second', now()), $2::int8, $3::int8)
    ON CONFLICT (channel, second) DO UPDATE
    SET calls = c.calls + excluded.calls, temporary = c.temporary + excluded.temporary
), refused AS (
    INSERT INTO provider_refusal_counts AS r (channel, outcome, calls)
    SELECT $1, o.outcome, o.calls
    FROM (VALUES ('THROTTLED', $11::int8), ('PROVIDER_MISCONFIGURED', $12::int8))
        AS o(outcome, calls)
    WHERE o.calls > 0
    ON CONFLICT (channel, outcome) DO UPDATE SET calls = r.calls + excluded.calls
), pruned AS (
    DELETE FROM channel_calls WHERE channel = $1 AND second < now() - interval '10 minutes'
), health AS (
    -- Read without a lock: almost every batch changes nothing here, and every batch of
    -- every sweeper reports, so a lock taken on each would queue them all on this row.
    -- The update below re-checks the circuit it decided from.
    SELECT channel, circuit, circuit_since FROM channel_health WHERE channel = $1
), window_totals AS (
    -- The rows of this statement's own insert are not visible here; its counts are added.
    -- Without a temporary failure in this batch the circuit cannot open: no need to sum.
    SELECT coalesce(sum(c.calls), 0) + $2::int8 AS calls,
           coalesce(sum(c.temporary), 0) + $3::int8 AS temporary
    FROM health h
    LEFT JOIN channel_calls c
           ON $3::int8 > 0 AND c.channel = $1
          AND c.second > now() - $6::int8 * interval '1 second'
          AND c.second >= date_trunc('second', h.circuit_since)
), decided AS (
    SELECT h.circuit AS before,
           h.circuit = 'HALF_OPEN' AND $2::int8 > 0 AND $3::int8 = 0 AND $10::int8 = 0
               AS probe_unanswered,
           CASE
               WHEN h.circuit = 'HALF_OPEN' AND $3::int8 > 0 THEN 'OPEN'
               WHEN h.circuit = 'HALF_OPEN' AND $10::int8 > 0 THEN 'CLOSED'
               WHEN h.circuit = 'CLOSED' AND w.calls >= $5::int8
                    AND w.temporary >= $4::float8 * w.calls
                   THEN 'OPEN'
               ELSE h.circuit
           END AS after,
           w.calls, w.temporary
    FROM health h, window_totals w
), moved AS (
    -- Only a move or a longer pause writes the row, and only from the circuit decided
    -- from: of two reports racing to move it, the second finds it moved and does nothing.
    UPDATE channel_health h
    SET circuit = d.after,
        circuit_since = CASE WHEN d.after <> d.before THEN now() ELSE h.circuit_since END,
        circuit_until = CASE WHEN d.after = 'OPEN' AND d.after <> d.before
                                 THEN now() + $7::int8 * interval '1 second'
                             WHEN d.after = 'CLOSED' THEN NULL
                             WHEN d.probe_unanswered THEN now()
                             ELSE h.circuit_until END,
        paused_until = CASE WHEN $8::timestamptz IS NOT NULL
                                 AND (h.paused_until IS NULL OR h.paused_until < $8)
                            THEN $8 ELSE h.paused_until END,
        pause_reason = CASE WHEN $8::timestamptz IS NOT NULL
                                 AND (h.paused_until IS NULL OR h.paused_until < $8)
                            THEN $9 ELSE h.pause_reason END,
        paused_since = CASE WHEN $8::timestamptz IS NOT NULL
                                 AND (h.paused_until IS NULL OR h.paused_until <= now())
                            THEN now() ELSE h.paused_since END
    FROM decided d
    WHERE h.channel = $1 AND h.circuit = d.before
      AND (d.after <> d.before OR d.probe_unanswered
           OR ($8::timestamptz IS NOT NULL AND (h.paused_until IS NULL OR h.paused_until < $8)))
    RETURNING d.before, d.after, d.calls, d.temporary
), events AS (
    INSERT INTO webhook_events (id, type, body, occurred_at)
    SELECT gen_random_uuid(),
           CASE m.after WHEN 'OPEN' THEN 'circuit.opened' ELSE 'circuit.closed' END,
           jsonb_build_object('channel', $1::text, 'circuit', m.after, 'calls', m.calls,
                              'failureRatio', CASE WHEN m.calls > 0
                                                   THEN round(m.temporary::numeric / m.calls, 3)
                                                   ELSE 0 END),
           now()
    FROM moved m
    WHERE m.after <> m.before AND m.after IN ('OPEN', 'CLOSED')
)
-- The circuit as this report left it: unchanged when another report moved it first.
SELECT d.before, coalesce(m.after, d.before) AS after, d.calls, d.temporary
FROM decided d LEFT JOIN moved m ON true
