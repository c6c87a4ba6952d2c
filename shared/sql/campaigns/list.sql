-- Newest first, strictly after the cursor ($1, $2), $3 rows (one more than a page tells
-- whether a next page exists).
SELECT id, owner, idempotency_key, fingerprint, name, channel, template_id, template_version, data, category, priority, send_at, recipient_ids IS NULL AS all_recipients, audience_size, expanded, status, created_at, finished_at
FROM campaigns
WHERE (created_at, id) < ($1, $2)
ORDER BY created_at DESC, id DESC
LIMIT $3
