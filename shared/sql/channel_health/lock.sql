-- Waits for channel $1's row, which every paced claim of the channel holds: the claims of
-- one channel run one at a time. The claim statement that follows in the same transaction
-- then reads the queue as it is after the wait; a statement that waited for the row itself
-- would read it as it was before, and step over every notification claimed meanwhile.
SELECT channel FROM channel_health WHERE channel = $1 FOR UPDATE
