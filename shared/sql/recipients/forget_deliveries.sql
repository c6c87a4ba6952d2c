-- The simulated provider's copies of erased notifications $1: no address, no content.
-- Run by the erasure after recipients/erase.sql, in its transaction but with a snapshot of
-- its own, so a copy that a delivery in flight wrote while the erasure ran is caught too
-- (one written after it is caught by notifications/record.sql).
UPDATE simulated_deliveries SET recipient = '[erased]', content = NULL
WHERE delivery_key = ANY ($1::uuid[])
  AND (recipient <> '[erased]' OR content IS NOT NULL)
