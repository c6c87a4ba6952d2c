-- The versions asked for: pairs of template id ($1) and version ($2, NULL for the latest).
-- Each row carries the version asked (`asked`, NULL for the latest); unknown ones are
-- missing.
SELECT w.template_id, w.version AS asked, v.version, t.channel, v.default_locale, v.locales,
       v.sample_data, v.sms, v.created_at
FROM unnest($1::text[], $2::int4[]) AS w(template_id, version)
JOIN templates t ON t.template_id = w.template_id
JOIN template_versions v
  ON v.template_id = t.template_id AND v.version = coalesce(w.version, t.latest_version)
