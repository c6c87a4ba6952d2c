-- Refreshes the planner's statistics of recipients once a campaign has expanded the first
-- chunk of every profile of an owner: profiles imported in bulk and not yet analyzed look
-- like a few rows, and each page of the walk is then planned as a sort of every id after
-- the cursor (100 pages of 100,000 profiles read 5,000,000 rows) instead of a read of the
-- next ids in the index. SKIP_LOCKED: an ANALYZE or VACUUM already under way (autovacuum's,
-- after an import) is not waited for.
ANALYZE (SKIP_LOCKED) recipients
