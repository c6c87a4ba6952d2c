-- Every channel's pause and circuit, with the calls and temporary failures of the current
-- window ($1 seconds, counted since the circuit last changed) and the running totals of
-- throttled and misconfiguration-refused calls, for GET /providers, the digest and
-- metrics. An open circuit whose time is up shows as HALF_OPEN: the next claim of the
-- channel takes its probe (the row itself moves when the probe is claimed).
SELECT h.channel,
       CASE WHEN h.circuit = 'OPEN' AND h.circuit_until <= now() THEN 'HALF_OPEN'
            ELSE h.circuit END AS circuit,
       h.circuit_since, h.circuit_until,
       CASE WHEN h.paused_until > now() THEN h.paused_until END AS paused_until,
       CASE WHEN h.paused_until > now() THEN h.pause_reason END AS pause_reason,
       CASE WHEN h.paused_until > now() THEN h.paused_since END AS paused_since,
       coalesce((SELECT r.calls FROM provider_refusal_counts r
                 WHERE r.channel = h.channel AND r.outcome = 'THROTTLED'), 0) AS throttled_total,
       coalesce((SELECT r.calls FROM provider_refusal_counts r
                 WHERE r.channel = h.channel AND r.outcome = 'PROVIDER_MISCONFIGURED'), 0)
           AS misconfigured_total,
       coalesce(sum(c.calls), 0)::int8 AS calls,
       coalesce(sum(c.temporary), 0)::int8 AS temporary
FROM channel_health h
LEFT JOIN channel_calls c
       ON c.channel = h.channel AND c.second > now() - $1::int8 * interval '1 second'
      AND c.second >= date_trunc('second', h.circuit_since)
GROUP BY h.channel, h.circuit, h.circuit_since, h.circuit_until, h.paused_until, h.pause_reason,
         h.paused_since
ORDER BY h.channel
