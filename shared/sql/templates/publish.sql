-- Publishes the next version of template $1 for channel $2: the template row is created
-- at version 1 or its latest version counted up (its row lock orders simultaneous
-- publishes), then the version is stored. No row when the template exists for another
-- channel. $3 default locale, $4 bodies per locale, $5 sample data, $6 SMS costs (or NULL).
WITH template AS (
    INSERT INTO templates AS t (template_id, channel, latest_version)
    VALUES ($1, $2, 1)
    ON CONFLICT (template_id) DO UPDATE SET latest_version = t.latest_version + 1
    WHERE t.channel = excluded.channel
    RETURNING template_id, channel, latest_version
)
INSERT INTO template_versions (template_id, version, default_locale, locales, sample_data, sms)
SELECT template_id, latest_version, $3, $4, $5, $6 FROM template
RETURNING template_id, version, (SELECT channel FROM template) AS channel, default_locale,
          locales, sample_data, sms, created_at
