-- Why: GET /digest ranks what needs attention now from a few aggregates over recent
-- windows. Each reads a small partial index instead of scanning the tables: the
-- notifications dead-lettered lately, the webhook events given up lately. Keys record
-- when they were last used (at most once an hour per key and process), so keys nobody
-- uses can be found and revoked.

CREATE INDEX notifications_dead_lettered_recent ON notifications (dead_lettered_at)
    WHERE status = 'DEAD_LETTERED';

CREATE INDEX webhook_events_given_up_recent ON webhook_events (given_up_at)
    WHERE dispatch_state = 'GIVEN_UP';

ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
