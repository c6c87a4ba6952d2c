-- Profile $2 of owner $1.
SELECT recipient_id, email, phone, push_tokens, timezone, locale, quiet_start, quiet_end,
          unsubscribed_all, created_at, updated_at
FROM recipients
WHERE owner = $1 AND recipient_id = $2
