-- Serialises the creation of the first key (deploy setup) until the transaction ends:
-- two setups at once must not both find no key and create one. The key is "notifyky".
SELECT pg_advisory_xact_lock(7957707062626577273)
