-- Every version of template $1, oldest first.
SELECT version, created_at FROM template_versions WHERE template_id = $1 ORDER BY version
