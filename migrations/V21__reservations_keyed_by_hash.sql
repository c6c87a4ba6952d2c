-- Why: a reservation kept the recipient's address, in the row and again in the key of
-- `rate_limit_reservations_by_recipient`: 207 B per notification after a drain of
-- 100,000 (heap 85, that index 79, the primary key 43; docs/BENCHMARKS.md, B7), and a
-- copy of every address sent to in the last window that erasure had to find. A
-- reservation is now filed under a 64-bit hash of the recipient, the one the admission
-- already locks (`hashtextextended(recipient, 0)`, rate_limit_reservations/
-- lock_recipients.sql), so the table holds no address at all.
--
-- Two recipients whose hashes collide would share one window (one in 2^64 per pair):
-- the limit would hold them back together, never let either send more.
ALTER TABLE rate_limit_reservations ADD COLUMN recipient_key bigint;
UPDATE rate_limit_reservations SET recipient_key = hashtextextended(recipient, 0);
ALTER TABLE rate_limit_reservations ALTER COLUMN recipient_key SET NOT NULL;
DROP INDEX rate_limit_reservations_by_recipient;
ALTER TABLE rate_limit_reservations DROP COLUMN recipient;
CREATE INDEX rate_limit_reservations_by_recipient
    ON rate_limit_reservations (recipient_key, reserved_at);
