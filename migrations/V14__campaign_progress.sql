-- Why: GET /digest reports a campaign still EXPANDING whose expansion made no progress
-- for a while (CAMPAIGN_STALLED): every chunk that commits sets progressed_at
-- (campaigns/advance.sql), and a new campaign starts the clock at its creation.
-- Campaigns expanding when this migration runs start the clock now rather than at a
-- guessed past moment, so an upgrade reports nothing until they really stall.
ALTER TABLE campaigns ADD COLUMN progressed_at timestamptz NOT NULL DEFAULT now();

-- The digest's read: only the few campaigns EXPANDING are in it, oldest progress first.
CREATE INDEX campaigns_expanding_by_progress ON campaigns (progressed_at)
    WHERE status = 'EXPANDING';
