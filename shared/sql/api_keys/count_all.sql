-- Every key ever created, revoked or not: once one existed, the API never starts open.
SELECT count(*) FROM api_keys
