-- Why: the per-recipient rolling-window limit needs one shared log of admissions that
-- every sweeper sees. One row per admitted notification; a retry of the same
-- notification inside the window keeps its row instead of taking a second slot.

CREATE TABLE rate_limit_reservations (
    notification_id uuid        PRIMARY KEY,
    recipient       text        NOT NULL,
    reserved_at     timestamptz NOT NULL DEFAULT now()
);

-- Admission counts one recipient's reservations inside the window.
CREATE INDEX rate_limit_reservations_by_recipient
    ON rate_limit_reservations (recipient, reserved_at);
