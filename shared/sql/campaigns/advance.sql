-- Moves campaign $1's checkpoint past the chunk just inserted: $2 more recipients, $3 the
-- last recipient id; $4 true when the audience is exhausted (EXPANDING → QUEUED). The
-- progress time is what the digest's CAMPAIGN_STALLED measures from: the clock as the chunk
-- ends, just before it commits, not the start of its transaction.
UPDATE campaigns
SET expanded = expanded + $2,
    cursor_recipient = $3,
    progressed_at = clock_timestamp(),
    status = CASE WHEN $4 THEN 'QUEUED' ELSE status END,
    -- A walk of every profile counted them when it was created; once done, its audience is
    -- who it found (profiles created or erased meanwhile), so expanded = audienceSize.
    audience_size = CASE WHEN $4 AND recipient_ids IS NULL THEN expanded + $2
                         ELSE audience_size END
WHERE id = $1 AND status = 'EXPANDING'
