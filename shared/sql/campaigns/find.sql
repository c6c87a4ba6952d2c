-- One campaign.
SELECT id, owner, idempotency_key, fingerprint, name, channel, template_id, template_version, data, category, priority, send_at, recipient_ids IS NULL AS all_recipients, audience_size, expanded, status, created_at, finished_at
FROM campaigns WHERE id = $1
