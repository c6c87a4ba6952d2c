-- Why: each client registers where its outcomes go (one WEBHOOK_URL served every client),
-- with its own signing secret and the event types it wants; a rotated secret keeps
-- signing for a day so receivers can switch without losing events. An event for a client
-- with several endpoints fans out to one outbox row per endpoint, so each endpoint has its
-- own attempts, backoff, given-up state and replay. Only additions to webhook_events.

CREATE TABLE webhook_endpoints (
    id                           uuid        PRIMARY KEY,
    -- The API key that registered it; the nil key for anonymous access.
    owner_key_id                 uuid        NOT NULL,
    -- Registered by an operator (or anonymously): also receives events of no client,
    -- such as circuit.opened and circuit.closed.
    operator                     boolean     NOT NULL,
    url                          text        NOT NULL CHECK (length(url) BETWEEN 8 AND 2048),
    -- NULL: every event type.
    event_types                  text[]      CHECK (cardinality(event_types) >= 1),
    -- Standard Webhooks secrets (whsec_<base64>); the drainer needs them in clear to sign.
    secret                       text        NOT NULL CHECK (secret LIKE 'whsec\_%'),
    previous_secret              text        CHECK (previous_secret LIKE 'whsec\_%'),
    previous_secret_valid_until  timestamptz,
    created_at                   timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT webhook_endpoints_previous_secret_has_an_end
        CHECK ((previous_secret IS NULL) = (previous_secret_valid_until IS NULL))
);

-- A client lists its own endpoints; routing finds an owner's endpoints.
CREATE INDEX webhook_endpoints_by_owner ON webhook_endpoints (owner_key_id, created_at, id);

-- endpoint_id: where this row goes (NULL: the default WEBHOOK_URL). No foreign key: a
-- deleted endpoint leaves its history, and the drainer gives its pending rows up.
-- event_id: the eventId a fan-out copy carries (the original row's id), so every endpoint
-- receives the same eventId. routed_at: when the drainer decided the destination; PENDING
-- rows are claimed only once routed.
ALTER TABLE webhook_events
    ADD COLUMN endpoint_id uuid,
    ADD COLUMN event_id    uuid,
    ADD COLUMN routed_at   timestamptz;

-- The routing step reads new events without walking the routed backlog.
CREATE INDEX webhook_events_unrouted ON webhook_events (next_dispatch_at)
    WHERE routed_at IS NULL AND dispatch_state = 'PENDING';
-- A client lists the events of its endpoints, newest first.
CREATE INDEX webhook_events_by_endpoint ON webhook_events (endpoint_id, created_at, id)
    WHERE endpoint_id IS NOT NULL;
-- Replay and the listing of given-up events.
CREATE INDEX webhook_events_given_up ON webhook_events (created_at, id)
    WHERE dispatch_state = 'GIVEN_UP';
