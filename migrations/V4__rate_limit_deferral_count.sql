-- Why: operators need to see how often the rate limit holds notifications back; the
-- count lives on the row so metrics stay one SQL aggregate and any process can serve them.
ALTER TABLE notifications
    ADD COLUMN rate_limit_deferrals integer NOT NULL DEFAULT 0 CHECK (rate_limit_deferrals >= 0);
