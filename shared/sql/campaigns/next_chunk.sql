-- The oldest campaign still expanding that no other worker is expanding, locked for this
-- chunk's transaction, with the next $1 of its listed recipient ids (none for a campaign
-- of every profile: those are read from recipients), the $1 listed after those (the chunk
-- that follows, prepared while this one is inserted) and its checkpoint.
SELECT id, owner, idempotency_key, fingerprint, name, channel, template_id, template_version, data, category, priority, send_at, recipient_ids IS NULL AS all_recipients, audience_size, expanded, status, created_at, finished_at, cursor_recipient,
       coalesce(recipient_ids[expanded + 1 : expanded + $1::int4], '{}') AS chunk,
       coalesce(recipient_ids[expanded + $1::int4 + 1 : expanded + 2 * $1::int4], '{}') AS following
FROM campaigns
WHERE status = 'EXPANDING'
ORDER BY created_at
LIMIT 1
FOR UPDATE SKIP LOCKED
