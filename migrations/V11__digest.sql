-- Why: GET /digest ranks what needs attention now from a few aggregates over recent
-- windows, each read through a small index instead of scanning the tables: the
-- dead-lettered notifications through the queue table's listing by status, the webhook
-- events given up lately through the index below. Keys record
-- when they were last used (at most once an hour per key and process), so keys nobody
-- uses can be found and revoked.

CREATE INDEX webhook_events_given_up_recent ON webhook_events (given_up_at)
    WHERE dispatch_state = 'GIVEN_UP';

ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
