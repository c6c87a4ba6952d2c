-- Creates or replaces profile $2 of owner $1 (the API key, nil for anonymous access):
-- $3 email, $4 phone, $5 push tokens, $6 timezone, $7 locale, $8 and $9 quiet hours,
-- $10 unsubscribed from everything. Preferences are kept.
INSERT INTO recipients AS r (owner, recipient_id, email, phone, push_tokens, timezone, locale,
                             quiet_start, quiet_end, unsubscribed_all)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (owner, recipient_id) DO UPDATE
SET email = excluded.email, phone = excluded.phone, push_tokens = excluded.push_tokens,
    timezone = excluded.timezone, locale = excluded.locale, quiet_start = excluded.quiet_start,
    quiet_end = excluded.quiet_end, unsubscribed_all = excluded.unsubscribed_all,
    updated_at = now()
RETURNING recipient_id, email, phone, push_tokens, timezone, locale, quiet_start, quiet_end,
          unsubscribed_all, created_at, updated_at
