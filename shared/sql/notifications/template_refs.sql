-- The template references of those of notifications $1 that use a template (their
-- payload's $template member), for the representation.
SELECT id, payload -> '$template' AS reference
FROM notifications
WHERE id = ANY($1) AND payload ? '$template'
