-- Why: the foreign keys from delivery_attempts and webhook_events to notifications were
-- checked row by row: every attempt and every outcome event the record writes ran its
-- own lookup of the notification with a KEY SHARE row lock (about 7 % of the database's
-- CPU in the drain), and every notification retention deletes ran two more lookups to
-- cascade. Neither check can fail: both tables are written only in the statement that
-- updates (or inserts) their notification, in the same CTE, so the row they name exists
-- and is locked. What the cascade did, this trigger does for the whole statement at
-- once: the attempts and webhook events of the deleted notifications go with them, in
-- the same transaction, whichever release's retention deleted them.

ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_notification_id_fkey;
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_notification_id_fkey;

CREATE FUNCTION notification_children_follow_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A retention step that found nothing to delete still fires the trigger (V16).
    IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
    -- By key (= ANY), not joined: a join to the transition table let the planner hash
    -- the whole child table for a batch of a few thousand.
    DELETE FROM delivery_attempts
    WHERE notification_id = ANY (ARRAY(SELECT id FROM old_rows));
    DELETE FROM webhook_events
    WHERE notification_id = ANY (ARRAY(SELECT id FROM old_rows));
    RETURN NULL;
END
$$;

CREATE TRIGGER notification_children_follow_delete AFTER DELETE ON notifications
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION notification_children_follow_delete();
