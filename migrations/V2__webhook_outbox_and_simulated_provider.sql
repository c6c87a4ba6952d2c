-- Why: every final transition writes its webhook event in the same transaction (the
-- outbox), and the simulated provider keeps its idempotency store where every worker sees it.

CREATE TABLE webhook_events (
    id                  uuid        PRIMARY KEY,
    notification_id     uuid        NOT NULL REFERENCES notifications (id),
    status              text        NOT NULL CHECK (status IN ('SENT', 'FAILED', 'DEAD_LETTERED')),
    -- The notification's attempt count and redrive generation at the transition.
    attempt_count       integer     NOT NULL CHECK (attempt_count >= 0),
    redrive_generation  integer     NOT NULL CHECK (redrive_generation >= 0),
    occurred_at         timestamptz NOT NULL,
    -- Dispatch state, owned by the webhook drainer.
    dispatch_state      text        NOT NULL DEFAULT 'PENDING'
                            CHECK (dispatch_state IN ('PENDING', 'DISPATCHING', 'DELIVERED', 'GIVEN_UP')),
    dispatch_attempts   integer     NOT NULL DEFAULT 0 CHECK (dispatch_attempts >= 0),
    next_dispatch_at    timestamptz NOT NULL DEFAULT now(),
    lease_expires_at    timestamptz,
    last_error          text,
    delivered_at        timestamptz,
    given_up_at         timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT webhook_events_one_per_transition UNIQUE (notification_id, status, redrive_generation),
    CONSTRAINT webhook_events_dispatching_iff_leased
        CHECK ((dispatch_state = 'DISPATCHING') = (lease_expires_at IS NOT NULL)),
    CONSTRAINT webhook_events_delivered_iff_delivered_at
        CHECK ((dispatch_state = 'DELIVERED') = (delivered_at IS NOT NULL)),
    CONSTRAINT webhook_events_given_up_iff_given_up_at
        CHECK ((dispatch_state = 'GIVEN_UP') = (given_up_at IS NOT NULL))
);

-- The drainer claims due events; delivered and given-up events never enter this index.
CREATE INDEX webhook_events_due ON webhook_events (next_dispatch_at)
    WHERE dispatch_state IN ('PENDING', 'DISPATCHING');

CREATE TABLE simulated_deliveries (
    delivery_key        uuid        PRIMARY KEY,
    channel             text        NOT NULL,
    recipient           text        NOT NULL,
    first_delivered_at  timestamptz NOT NULL DEFAULT now(),
    calls               integer     NOT NULL DEFAULT 1 CHECK (calls >= 1)
);
