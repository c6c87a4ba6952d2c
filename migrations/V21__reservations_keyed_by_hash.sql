-- Why: a reservation kept the recipient's address, in the row and again in the key of
-- `rate_limit_reservations_by_recipient`: 207 B per notification after a drain of
-- 100,000 (heap 85, that index 79, the primary key 43; docs/BENCHMARKS.md, B7), and a
-- copy of every address sent to in the last window that erasure had to find. A
-- reservation is now filed under a 64-bit hash of the recipient, the one the admission
-- already locks (`hashtextextended(recipient, 0)`, rate_limit_reservations/
-- lock_recipients.sql), and this release writes no address into the table.
--
-- Two recipients whose hashes collide would share one window (one in 2^64 per pair):
-- the limit would hold them back together, never let either send more.
--
-- Additive, like every migration: sweepers of the previous release, still running while
-- the new code rolls out, insert `recipient` and read by it. A row trigger files their
-- rows under the hash too, and their look-ups keep an index (partial: rows this release
-- writes are not in it). They do not see the reservations the new code takes, so while
-- both run the old ones may admit more than the limit; the rows they wrote leave the
-- table with the window. `recipient` goes in a later release.
ALTER TABLE rate_limit_reservations ADD COLUMN recipient_key bigint;
UPDATE rate_limit_reservations SET recipient_key = hashtextextended(recipient, 0);
ALTER TABLE rate_limit_reservations ALTER COLUMN recipient_key SET NOT NULL;
ALTER TABLE rate_limit_reservations ALTER COLUMN recipient DROP NOT NULL;

CREATE FUNCTION rate_limit_reservations_file_by_hash() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.recipient_key := hashtextextended(NEW.recipient, 0);
    RETURN NEW;
END
$$;
CREATE TRIGGER file_by_hash BEFORE INSERT OR UPDATE ON rate_limit_reservations
    FOR EACH ROW WHEN (NEW.recipient IS NOT NULL)
    EXECUTE FUNCTION rate_limit_reservations_file_by_hash();

DROP INDEX rate_limit_reservations_by_recipient;
CREATE INDEX rate_limit_reservations_by_recipient
    ON rate_limit_reservations (recipient_key, reserved_at);
CREATE INDEX rate_limit_reservations_by_address
    ON rate_limit_reservations (recipient, reserved_at) WHERE recipient IS NOT NULL;
