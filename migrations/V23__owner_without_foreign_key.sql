-- Why: every notification made with an API key checked its owner against api_keys row by
-- row, and each check took a KEY SHARE lock on the key's row. All of a client's
-- concurrent intake transactions lock that same row, so PostgreSQL records their shared
-- lock as a new multixact for nearly every insert: work on the intake path, and member
-- space that anti-wraparound vacuums then have to reclaim. The check cannot fail: intake
-- takes the owner from the key that authenticated the request, and keys are revoked,
-- never deleted. (Measured with pgbench: docs/BENCHMARKS.md, the notes on V23.)

ALTER TABLE notifications DROP CONSTRAINT notifications_owner_key_id_fkey;
