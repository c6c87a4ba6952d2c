-- Channel $1 is sent by the simulated provider, which has no circuit and is never paused:
-- a circuit or a pause left from a real provider it had before is cleared, so that
-- GET /providers, the metrics and the digest do not report a state no claim heeds.
-- Writes nothing when there is nothing to clear.
UPDATE channel_health
SET circuit = 'CLOSED', circuit_since = now(), circuit_until = NULL,
    paused_until = NULL, pause_reason = NULL
WHERE channel = $1 AND (circuit <> 'CLOSED' OR paused_until IS NOT NULL)
