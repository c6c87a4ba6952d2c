-- Why: an event sent to several endpoints is one row per endpoint; the copies carry the
-- original row's id in event_id and no notification_id. A notification's events
-- (GET /notifications/{id}/webhook-events) must show every endpoint's delivery, so the
-- copies are found from the originals through this index. Only copies have an event_id.
CREATE INDEX webhook_events_copies ON webhook_events (event_id) WHERE event_id IS NOT NULL;
