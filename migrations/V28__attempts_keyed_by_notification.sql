-- Why: every statement reads a notification's attempts by its id (the listing, the record's
-- look for results taken over, erasure, the delete that follows a notification), never an
-- attempt by its own number; yet each attempt entered two B-trees, the primary key on
-- `id` and `delivery_attempts_by_notification (notification_id, id)`. The second becomes
-- the primary key and the first goes: one index entry per provider call instead of two
-- (the identity keeps ordering a notification's attempts). Building the key reads the
-- table once under its lock; retention keeps the table to its window.

ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_pkey;
DROP INDEX delivery_attempts_by_notification;
ALTER TABLE delivery_attempts
    ADD CONSTRAINT delivery_attempts_pkey PRIMARY KEY (notification_id, id);
