-- Why: the API admits only callers with a key. Keys are stored as SHA-256 hashes of
-- their secret part (never the key itself); each has a scope. Notifications remember
-- which key created them, so a client key sees only its own work.

CREATE TABLE api_keys (
    id           uuid        PRIMARY KEY,
    name         text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    scope        text        NOT NULL CHECK (scope IN ('client', 'operator')),
    secret_hash  text        NOT NULL CHECK (length(secret_hash) = 64),
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

ALTER TABLE notifications ADD COLUMN owner_key_id uuid REFERENCES api_keys (id);

-- A client lists its own notifications, newest first.
CREATE INDEX notifications_list_by_owner ON notifications (owner_key_id, created_at DESC, id DESC)
    WHERE owner_key_id IS NOT NULL;
