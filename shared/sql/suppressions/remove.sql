-- Removes the entry of channel $1 with keyed hash $2; returns 1 when there was one.
DELETE FROM suppressions WHERE channel = $1 AND address_hash = $2 RETURNING 1
