-- Why: the notifications table is the queue and the record of every notification.
-- Illegal states are rejected by the database itself, not only by the code.

CREATE TABLE notifications (
    id                      uuid        PRIMARY KEY,
    idempotency_key         text        NOT NULL,
    -- SHA-256 hex of the canonical request; decides replay (same) vs conflict (different).
    fingerprint             text        NOT NULL CHECK (length(fingerprint) = 64),
    recipient               text        NOT NULL CHECK (length(recipient) BETWEEN 1 AND 320),
    channel                 text        NOT NULL CHECK (channel IN ('EMAIL', 'SMS', 'PUSH')),
    -- 0 = HIGH, 1 = NORMAL, 2 = LOW: ascending order is claim order.
    priority                smallint    NOT NULL CHECK (priority BETWEEN 0 AND 2),
    payload                 jsonb       NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    status                  text        NOT NULL DEFAULT 'PENDING' CHECK (status IN
                                ('PENDING', 'PROCESSING', 'SENT', 'FAILED', 'DEAD_LETTERED', 'CANCELLED')),
    scheduled_at            timestamptz NOT NULL,
    next_attempt_at         timestamptz NOT NULL,
    attempt_count           integer     NOT NULL DEFAULT 0,
    max_attempts            integer     NOT NULL CHECK (max_attempts >= 1),
    last_error              text,
    -- The claim: present exactly while PROCESSING.
    claim_token             uuid,
    claimed_by              text,
    lease_expires_at        timestamptz,
    -- Set when an expired final attempt was granted its one reconciliation attempt.
    reconciliation_granted  boolean     NOT NULL DEFAULT false,
    sent_at                 timestamptz,
    failed_at               timestamptz,
    dead_lettered_at        timestamptz,
    cancelled_at            timestamptz,
    redrive_count           integer     NOT NULL DEFAULT 0 CHECK (redrive_count >= 0),
    last_redriven_at        timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT notifications_idempotency_key_unique UNIQUE (idempotency_key),
    CONSTRAINT notifications_attempts_in_range
        CHECK (attempt_count >= 0 AND attempt_count <= max_attempts),
    CONSTRAINT notifications_pending_has_attempt_left
        CHECK (status <> 'PENDING' OR attempt_count < max_attempts),
    CONSTRAINT notifications_processing_iff_claimed
        CHECK ((status = 'PROCESSING') = (claim_token IS NOT NULL)
               AND (claim_token IS NULL) = (claimed_by IS NULL)
               AND (claim_token IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT notifications_sent_iff_sent_at       CHECK ((status = 'SENT') = (sent_at IS NOT NULL)),
    CONSTRAINT notifications_failed_iff_failed_at   CHECK ((status = 'FAILED') = (failed_at IS NOT NULL)),
    CONSTRAINT notifications_dead_iff_dead_at       CHECK ((status = 'DEAD_LETTERED') = (dead_lettered_at IS NOT NULL)),
    CONSTRAINT notifications_cancelled_iff_cancelled_at
        CHECK ((status = 'CANCELLED') = (cancelled_at IS NOT NULL))
);

-- The claim reads this index top-down, one priority at a time; finished rows never enter it.
CREATE INDEX notifications_claim_order ON notifications (priority, next_attempt_at, created_at)
    WHERE status = 'PENDING';

-- Recovery of expired claims looks only at PROCESSING rows.
CREATE INDEX notifications_lease_expiry ON notifications (lease_expires_at)
    WHERE status = 'PROCESSING';

-- Keyset listing, newest first: all rows, by status (the dead-letter queue), by recipient.
CREATE INDEX notifications_list_all ON notifications (created_at DESC, id DESC);
CREATE INDEX notifications_list_by_status ON notifications (status, created_at DESC, id DESC);
CREATE INDEX notifications_list_by_recipient ON notifications (recipient, created_at DESC, id DESC);
