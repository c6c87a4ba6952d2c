-- Why: the audience layer. A notification has a category and may name a recipient profile
-- instead of an address; it can be SUPPRESSED (never sent: no address, a suppressed
-- address, an unsubscribe, a category opt-out) or EXPIRED (not handed to the provider in
-- time). Profiles hold a person's addresses, timezone, locale, quiet hours and global
-- unsubscribe; preferences opt a person out of a category on a channel. Profiles belong to
-- the API key that wrote them (the nil key for anonymous access).

ALTER TABLE notifications DROP CONSTRAINT notifications_status_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_status_check CHECK (status IN
    ('PENDING', 'PROCESSING', 'SENT', 'FAILED', 'DEAD_LETTERED', 'CANCELLED', 'SUPPRESSED', 'EXPIRED'));

ALTER TABLE notifications
    ADD COLUMN category text NOT NULL DEFAULT 'general'
        CHECK (category ~ '^[a-z0-9][a-z0-9_.-]{0,63}$'),
    ADD COLUMN recipient_id text CHECK (recipient_id ~ '^[A-Za-z0-9._:@-]{1,128}$'),
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN suppressed_at timestamptz,
    ADD COLUMN suppressed_reason text CHECK (suppressed_reason IN
        ('NO_ADDRESS', 'SUPPRESSED_ADDRESS', 'UNSUBSCRIBED', 'CATEGORY_OPT_OUT')),
    ADD COLUMN expired_at timestamptz,
    ADD COLUMN quiet_hours_deferred_from timestamptz,
    ADD CONSTRAINT notifications_suppressed_iff_suppressed_at
        CHECK ((status = 'SUPPRESSED') = (suppressed_at IS NOT NULL)
               AND (suppressed_at IS NULL) = (suppressed_reason IS NULL)),
    ADD CONSTRAINT notifications_expired_iff_expired_at
        CHECK ((status = 'EXPIRED') = (expired_at IS NOT NULL));

-- The expiry step reads only PENDING notifications that can expire, soonest first.
CREATE INDEX notifications_expiry ON notifications (expires_at)
    WHERE status = 'PENDING' AND expires_at IS NOT NULL;

-- Erasure finds a person's notifications by the profile they named.
CREATE INDEX notifications_by_recipient_id ON notifications
    ((coalesce(owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid)), recipient_id)
    WHERE recipient_id IS NOT NULL;

ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_status_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_status_check
    CHECK (status IN ('SENT', 'FAILED', 'DEAD_LETTERED', 'SUPPRESSED', 'EXPIRED'));

CREATE TABLE recipients (
    -- The API key that wrote the profile; the nil key for anonymous access.
    owner             uuid        NOT NULL,
    recipient_id      text        NOT NULL CHECK (recipient_id ~ '^[A-Za-z0-9._:@-]{1,128}$'),
    email             text        CHECK (length(email) BETWEEN 3 AND 320),
    phone             text        CHECK (phone ~ '^\+[0-9]{8,15}$'),
    push_tokens       text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(push_tokens) <= 8),
    timezone          text        NOT NULL DEFAULT 'UTC',
    locale            text        NOT NULL DEFAULT 'en',
    quiet_start       time,
    quiet_end         time,
    unsubscribed_all  boolean     NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, recipient_id),
    CONSTRAINT recipients_quiet_hours_whole CHECK ((quiet_start IS NULL) = (quiet_end IS NULL))
);

-- An operator asking for a person's unsubscribe link names the profile without its key.
CREATE INDEX recipients_by_id ON recipients (recipient_id);

CREATE TABLE recipient_preferences (
    owner         uuid    NOT NULL,
    recipient_id  text    NOT NULL,
    category      text    NOT NULL CHECK (category ~ '^[a-z0-9][a-z0-9_.-]{0,63}$' OR category = '*'),
    channel       text    NOT NULL CHECK (channel IN ('EMAIL', 'SMS', 'PUSH')),
    opted_in      boolean NOT NULL,
    PRIMARY KEY (owner, recipient_id, category, channel),
    FOREIGN KEY (owner, recipient_id) REFERENCES recipients (owner, recipient_id) ON DELETE CASCADE
);
