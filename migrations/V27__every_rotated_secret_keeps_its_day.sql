-- Why: an endpoint kept one previous secret, so a second rotation inside the first one's
-- day dropped the secret that the first rotation's answer had promised would sign until
-- then. Every rotated secret now keeps its own end: `previous_secrets[i]` signs until
-- `previous_secrets_valid_until[i]` (newest first; rotate.sql prunes the ended ones and
-- keeps at most ten).
--
-- Only additions: `previous_secret` and `previous_secret_valid_until` stay, because
-- processes of the previous release read and write them until they are replaced.
-- rotate.sql keeps them on the newest rotated-out secret, and the claim and the next
-- rotation also take a secret found there but missing from the arrays (one rotated out by
-- such a process during the rollout).

ALTER TABLE webhook_endpoints
    ADD COLUMN previous_secrets text[] NOT NULL DEFAULT '{}',
    ADD COLUMN previous_secrets_valid_until timestamptz[] NOT NULL DEFAULT '{}',
    ADD CONSTRAINT webhook_endpoints_previous_secrets_have_an_end
        CHECK (cardinality(previous_secrets) = cardinality(previous_secrets_valid_until));

-- A previous secret still inside its day keeps it.
UPDATE webhook_endpoints
SET previous_secrets = ARRAY[previous_secret],
    previous_secrets_valid_until = ARRAY[previous_secret_valid_until]
WHERE previous_secret IS NOT NULL AND previous_secret_valid_until > now();
