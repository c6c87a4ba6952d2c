-- Templates newest first, strictly after the cursor ($1 created_at, $2 template id), $3
-- rows (one more than a page tells whether a next page exists), each with its latest
-- version's default locale, locales (sorted) and time.
SELECT t.template_id, t.channel, t.latest_version, t.created_at, v.default_locale,
       ARRAY(SELECT jsonb_object_keys(v.locales) ORDER BY 1) AS locales,
       v.created_at AS updated_at
FROM templates t
JOIN template_versions v ON v.template_id = t.template_id AND v.version = t.latest_version
WHERE (t.created_at, t.template_id) < ($1, $2)
ORDER BY t.created_at DESC, t.template_id DESC
LIMIT $3
