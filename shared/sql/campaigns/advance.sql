-- Moves campaign $1's checkpoint past the chunk just inserted: $2 more recipients, $3 the
-- last recipient id; $4 true when the audience is exhausted (EXPANDING → QUEUED). The
-- progress time is what the digest's CAMPAIGN_STALLED measures from.
UPDATE campaigns
SET expanded = expanded + $2,
    cursor_recipient = $3,
    progressed_at = now(),
    status = CASE WHEN $4 THEN 'QUEUED' ELSE status END
WHERE id = $1 AND status = 'EXPANDING'
