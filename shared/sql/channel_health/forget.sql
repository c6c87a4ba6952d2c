-- Channel $1 is sent by the simulated provider, which has no circuit and is never paused:
-- a circuit or a pause left from a real provider it had before is cleared, so that
-- GET /providers, the metrics and the digest do not report a state no claim heeds. A
-- circuit that was not CLOSED closes with its circuit.closed event, as a probe would
-- close it, so a subscriber told it opened is told it closed. Writes nothing when there
-- is nothing to clear; returns the circuit and pause reason it cleared.
WITH cleared AS (
    UPDATE channel_health h
    SET circuit = 'CLOSED', circuit_since = now(), circuit_until = NULL,
        paused_until = NULL, pause_reason = NULL, paused_since = NULL
    FROM (SELECT circuit, pause_reason FROM channel_health WHERE channel = $1 FOR UPDATE) AS old
    WHERE h.channel = $1 AND (h.circuit <> 'CLOSED' OR h.paused_until IS NOT NULL)
    RETURNING old.circuit AS circuit_before, old.pause_reason AS pause_before
), events AS (
    INSERT INTO webhook_events (id, type, body, occurred_at)
    SELECT gen_random_uuid(), 'circuit.closed',
           jsonb_build_object('channel', $1::text, 'circuit', 'CLOSED', 'calls', 0,
                              'failureRatio', 0, 'reason', 'now sent by the simulated provider'),
           now()
    FROM cleared WHERE circuit_before <> 'CLOSED'
)
SELECT circuit_before, pause_before FROM cleared
