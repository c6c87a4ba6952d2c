-- Why: erasure finds a person's notifications sent to one of their addresses without a
-- profile, comparing emails without regard to case (`lower(recipient)`). No index held
-- that, so every erasure read all of the owner's notifications: 127 ms at 400,000 rows,
-- growing with the table until it would meet the statement timeout. And the listing by
-- recipient kept the address itself as its key, 137 B per notification after a drain of
-- 100,000 (docs/BENCHMARKS.md, B7), with a collation-aware text comparison on every
-- insertion.
--
-- One index now serves both: a 64-bit hash of the lowercased address, then the listing
-- order. A query names the hash and rechecks the address itself, so two addresses whose
-- hashes collide (or that differ only in case) share index entries, never results.
CREATE INDEX notifications_by_address
    ON notifications (hashtextextended(lower(recipient), 0), created_at DESC, id DESC);
DROP INDEX notifications_list_by_recipient;
