-- Whether any endpoint is registered.
SELECT EXISTS (SELECT 1 FROM webhook_endpoints) AS registered
