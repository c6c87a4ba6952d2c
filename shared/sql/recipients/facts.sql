-- What the audience rules read of the profiles $2 of owner $1: addresses, timezone, locale,
-- quiet hours, global unsubscribe, and the (category, channel) pairs each opted out of.
SELECT r.recipient_id, r.email, r.phone, r.push_tokens, r.timezone, r.locale, r.quiet_start,
       r.quiet_end, r.unsubscribed_all,
       coalesce(array_agg(p.category) FILTER (WHERE p.category IS NOT NULL), '{}') AS opted_out_categories,
       coalesce(array_agg(p.channel) FILTER (WHERE p.category IS NOT NULL), '{}') AS opted_out_channels
FROM recipients r
LEFT JOIN recipient_preferences p
       ON p.owner = r.owner AND p.recipient_id = r.recipient_id AND NOT p.opted_in
WHERE r.owner = $1 AND r.recipient_id = ANY($2)
GROUP BY r.owner, r.recipient_id
