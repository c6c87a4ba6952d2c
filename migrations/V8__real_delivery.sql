-- Why: real providers. A notification has a traffic class (transactional or bulk) that
-- decides which part of a channel's rate it may use, and keeps the provider's message id.
-- Every provider call leaves an attempt row. Channels are paced by token buckets and
-- guarded by pauses and circuit breakers that every sweeper shares. Addresses a provider
-- says cannot receive are suppressed. Webhook events may report a channel (circuit
-- changes) as well as a notification.

ALTER TABLE notifications
    ADD COLUMN class text NOT NULL DEFAULT 'TRANSACTIONAL'
        CHECK (class IN ('TRANSACTIONAL', 'BULK')),
    ADD COLUMN provider_message_id text;

-- The claim reads one channel and class at a time, each priority from the top: a paced
-- channel's backlog never lies in the path of another channel's claim, and transactional
-- work is never behind bulk work in the index.
DROP INDEX notifications_claim_order;
CREATE INDEX notifications_claim_order
    ON notifications (channel, class, priority, next_attempt_at, created_at)
    WHERE status = 'PENDING';

-- One row per provider call, throttled and misconfigured calls included. No recipient and
-- no payload: the error text and the provider's ids only.
CREATE TABLE delivery_attempts (
    id                   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    notification_id      uuid        NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    attempt              integer     NOT NULL CHECK (attempt >= 1),
    worker               text        NOT NULL,
    started_at           timestamptz NOT NULL,
    finished_at          timestamptz NOT NULL,
    outcome              text        NOT NULL CHECK (outcome IN ('DELIVERED', 'THROTTLED',
                             'TEMPORARY', 'PERMANENT', 'INVALID_RECIPIENT', 'PROVIDER_MISCONFIGURED')),
    provider_message_id  text,
    error                text,
    -- Set by provider feedback (the SES delivery event).
    delivered_at         timestamptz
);
CREATE INDEX delivery_attempts_by_notification ON delivery_attempts (notification_id, id);
CREATE INDEX delivery_attempts_by_message ON delivery_attempts (provider_message_id)
    WHERE provider_message_id IS NOT NULL;

-- Addresses that must not be sent to, per channel, found by a keyed hash of the address
-- (HMAC-SHA256 with UNSUBSCRIBE_SECRET; email lower-cased first, other channels exact).
-- The address itself is kept for operators until its person is erased, when it becomes
-- NULL and only the hash remains.
CREATE TABLE suppressions (
    channel       text        NOT NULL CHECK (channel IN ('EMAIL', 'SMS', 'PUSH')),
    address_hash  text        NOT NULL CHECK (length(address_hash) = 64),
    address       text,
    reason        text        NOT NULL CHECK (reason IN ('MANUAL', 'UNSUBSCRIBED', 'BOUNCED',
                                  'COMPLAINED', 'INVALID_RECIPIENT')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel, address_hash)
);
-- Operators page through the list newest first.
CREATE INDEX suppressions_listing ON suppressions (created_at DESC, channel, address_hash);

-- A channel's shared state: a pause (a provider said 429, or cannot send for us) and its
-- circuit breaker. Rows exist for every channel.
CREATE TABLE channel_health (
    channel          text        PRIMARY KEY CHECK (channel IN ('EMAIL', 'SMS', 'PUSH')),
    paused_until     timestamptz,
    pause_reason     text,
    circuit          text        NOT NULL DEFAULT 'CLOSED'
                         CHECK (circuit IN ('CLOSED', 'OPEN', 'HALF_OPEN')),
    circuit_since    timestamptz NOT NULL DEFAULT now(),
    -- OPEN: claims wait until then; HALF_OPEN: the probe's claim is held until then.
    circuit_until    timestamptz,
    CONSTRAINT channel_health_pause_has_reason CHECK ((paused_until IS NULL) = (pause_reason IS NULL))
);
INSERT INTO channel_health (channel) VALUES ('EMAIL'), ('SMS'), ('PUSH');

-- Calls and temporary failures per channel and second: the circuit breaker's rolling window.
CREATE TABLE channel_calls (
    channel    text        NOT NULL,
    second     timestamptz NOT NULL,
    calls      integer     NOT NULL,
    temporary  integer     NOT NULL,
    PRIMARY KEY (channel, second)
);

-- A token bucket per channel and class: rate per second and a burst of one second of
-- rate. Sweepers write the configured rates at start; tokens are refilled and taken in
-- the claim statement.
CREATE TABLE token_buckets (
    channel      text             NOT NULL CHECK (channel IN ('EMAIL', 'SMS', 'PUSH')),
    class        text             NOT NULL CHECK (class IN ('TRANSACTIONAL', 'BULK')),
    rate         double precision NOT NULL CHECK (rate >= 0),
    burst        double precision NOT NULL CHECK (burst >= 0),
    tokens       double precision NOT NULL,
    refilled_at  timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (channel, class)
);

-- Webhook events of a channel (circuit.opened, circuit.closed) have no notification; every
-- event has a type, and events that are not about a notification carry their own body.
ALTER TABLE webhook_events
    ALTER COLUMN notification_id DROP NOT NULL,
    ALTER COLUMN status DROP NOT NULL,
    ALTER COLUMN attempt_count DROP NOT NULL,
    ALTER COLUMN redrive_generation DROP NOT NULL,
    ADD COLUMN type text,
    ADD COLUMN body jsonb;
UPDATE webhook_events SET type = 'notification.' || lower(status);
ALTER TABLE webhook_events
    ALTER COLUMN type SET NOT NULL,
    ADD CONSTRAINT webhook_events_notification_or_body
        CHECK ((notification_id IS NOT NULL AND status IS NOT NULL AND attempt_count IS NOT NULL
                AND redrive_generation IS NOT NULL) OR body IS NOT NULL);
