-- Owner $1's campaigns still expanding, locked until the erasure commits: waits for a
-- chunk being inserted (so the erasure's next statement sees its notifications) and keeps
-- the next chunk from reading the audience until the erased person has left it.
SELECT id FROM campaigns
WHERE owner = $1 AND status = 'EXPANDING'
ORDER BY id
FOR UPDATE
