-- Why: content. Templates hold one body per locale in immutable numbered versions, so a
-- notification can name a template instead of carrying its text, and pin the version it
-- was enqueued with. Campaigns fan one template out to an audience in restartable chunks.
--
-- A notification that uses a template keeps the reference in its payload, which stays
-- small: {"$template": {"id", "version", "locale", "campaign"?}, "data": {…}}; the sweeper
-- renders it at send time. No column of notifications changes.

CREATE TABLE templates (
    template_id     text        PRIMARY KEY CHECK (template_id ~ '^[a-z0-9][a-z0-9_.-]{0,63}$'),
    -- Fixed by the first version: every version of a template is for one channel.
    channel         text        NOT NULL CHECK (channel IN ('EMAIL', 'SMS', 'PUSH')),
    latest_version  integer     NOT NULL CHECK (latest_version >= 1),
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE template_versions (
    template_id     text        NOT NULL REFERENCES templates (template_id),
    version         integer     NOT NULL CHECK (version >= 1),
    default_locale  text        NOT NULL,
    -- {"<locale>": {"<field>": "<template source>", …}, …}; the default locale is one of them.
    locales         jsonb       NOT NULL CHECK (jsonb_typeof(locales) = 'object' AND locales ? default_locale),
    sample_data     jsonb       NOT NULL CHECK (jsonb_typeof(sample_data) = 'object'),
    -- SMS only: {"<locale>": {"encoding", "characters", "segments"}} of the sample rendering.
    sms             jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (template_id, version)
);

CREATE TABLE campaigns (
    id                  uuid        PRIMARY KEY,
    -- The API key that created it; the nil key for anonymous access. Its recipients are
    -- the audience, and its key space holds the notifications' idempotency keys.
    owner               uuid        NOT NULL,
    idempotency_key     text        NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint         text        NOT NULL CHECK (length(fingerprint) = 64),
    name                text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    channel             text        NOT NULL CHECK (channel IN ('EMAIL', 'SMS', 'PUSH')),
    template_id         text        NOT NULL,
    template_version    integer     NOT NULL,
    data                jsonb       NOT NULL CHECK (jsonb_typeof(data) = 'object'),
    category            text        NOT NULL CHECK (category ~ '^[a-z0-9][a-z0-9_.-]{0,63}$'),
    priority            smallint    NOT NULL CHECK (priority BETWEEN 0 AND 2),
    send_at             timestamptz,
    -- The audience: these ids in order, or (NULL) every profile of the owner.
    recipient_ids       text[],
    audience_size       integer     NOT NULL CHECK (audience_size >= 0),
    -- The checkpoint: recipients expanded so far, and the last recipient id of an
    -- all-recipients walk (keyset order).
    expanded            integer     NOT NULL DEFAULT 0 CHECK (expanded >= 0),
    cursor_recipient    text,
    status              text        NOT NULL DEFAULT 'EXPANDING'
                            CHECK (status IN ('EXPANDING', 'QUEUED', 'DONE', 'CANCELLED')),
    created_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    FOREIGN KEY (template_id, template_version) REFERENCES template_versions (template_id, version),
    CONSTRAINT campaigns_key_per_owner UNIQUE (owner, idempotency_key),
    CONSTRAINT campaigns_finished_iff_final
        CHECK ((status IN ('DONE', 'CANCELLED')) = (finished_at IS NOT NULL))
);

-- Expansion and completion look only at campaigns still in progress, oldest first.
CREATE INDEX campaigns_in_progress ON campaigns (created_at) WHERE status IN ('EXPANDING', 'QUEUED');
-- Keyset listing per owner, newest first.
CREATE INDEX campaigns_list ON campaigns (owner, created_at DESC, id DESC);

-- A campaign's notifications: its counts, its completion and its cancel. The status is
-- not in the index (no index on notifications covers a column a transition changes, so
-- transitions stay HOT); it is filtered on the campaign's rows.
CREATE INDEX notifications_by_campaign ON notifications ((payload #>> '{$template,campaign}'))
    WHERE payload #>> '{$template,campaign}' IS NOT NULL;

-- What the simulated provider was handed for a rendered template (tests read it; literal
-- payloads are not copied).
ALTER TABLE simulated_deliveries ADD COLUMN content jsonb;
