-- Stops campaign $1: EXPANDING or QUEUED → CANCELLED. Waits for a chunk being expanded
-- (it holds the row), so no chunk commits after this. Returns the campaign in any state.
WITH cancelled AS (
    UPDATE campaigns SET status = 'CANCELLED', finished_at = now()
    WHERE id = $1 AND status IN ('EXPANDING', 'QUEUED')
    RETURNING id
)
SELECT id, owner, idempotency_key, fingerprint, name, channel, template_id, template_version, data, category, priority, send_at, recipient_ids IS NULL AS all_recipients, audience_size, expanded, status, created_at, finished_at
FROM campaigns WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM cancelled)
UNION ALL
SELECT c.id, c.owner, c.idempotency_key, c.fingerprint, c.name, c.channel, c.template_id,
       c.template_version, c.data, c.category, c.priority, c.send_at,
       c.recipient_ids IS NULL, c.audience_size, c.expanded, 'CANCELLED', c.created_at, now()
FROM campaigns c JOIN cancelled USING (id)
