-- Forgets profile $2 of owner $1 and its preferences, and every trace of its
-- addresses $3 (their suppression hashes are $4, per channel $5): the notifications sent
-- through the profile, or to one of its addresses without one, keep no address, no
-- recipient id (a client may use an address as the id), no payload and no error text
-- (PENDING ones are cancelled), and their request fingerprint is keyed: HMAC-SHA256 of
-- it under the secret whose inner and outer padded keys are $6 and $7 (RFC 2104). Their
-- attempts lose their error text (a provider may quote the address), the rate limit its
-- reservations; suppressions keep only the hash. A campaign's notification keeps only
-- the campaign's id in its payload, so the campaign's counts still count it; no
-- idempotency key or campaign audience keeps the id. Without a profile ($3 empty), what
-- was kept under its id goes all the same. One statement: all of it or none. Run after
-- campaigns/lock_expanding, so no chunk of an expanding campaign is in flight; returns
-- the ids of the notifications redacted, whose simulated provider's copies
-- recipients/forget_deliveries.sql then forgets.
WITH profile AS (
    DELETE FROM recipients WHERE owner = $1 AND recipient_id = $2 RETURNING 1
), preferences AS (
    DELETE FROM recipient_preferences WHERE owner = $1 AND recipient_id = $2 RETURNING 1
), theirs AS (
    -- Redacted by an earlier erasure: nothing left to forget.
    SELECT id FROM notifications
    WHERE coalesce(owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid) = $1
      AND recipient <> '[erased]'
      AND (recipient_id = $2
           -- By notifications_by_address: an address equal to one of $3, or equal to it
           -- but for case, has the hash of $3's lowercased form.
           OR (recipient_id IS NULL
               AND hashtextextended(lower(recipient), 0)
                   = ANY (ARRAY(SELECT hashtextextended(lower(a), 0) FROM unnest($3::text[]) AS a))
               AND (recipient = ANY($3) OR lower(recipient) = ANY($3))))
), redacted AS (
    UPDATE notifications n
    SET recipient = '[erased]', recipient_id = NULL, last_error = NULL,
        -- A campaign's key names the person (campaign:<campaign>:<recipient id>); a
        -- client's own key is left as it was, so a replay is still recognised.
        idempotency_key = CASE WHEN n.payload #> '{$template,campaign}' IS NULL
                               THEN n.idempotency_key
                               ELSE 'campaign:' || (n.payload #>> '{$template,campaign}')
                                    || ':erased:' || n.id END,
        fingerprint = encode(sha256($7::bytea
                                    || sha256($6::bytea || convert_to(n.fingerprint, 'UTF8'))),
                             'hex'),
        payload = CASE WHEN n.payload #> '{$template,campaign}' IS NULL THEN '{}'::jsonb
                       ELSE jsonb_build_object('$template', jsonb_build_object(
                                'campaign', n.payload #> '{$template,campaign}')) END,
        status = CASE WHEN n.status = 'PENDING' THEN 'CANCELLED' ELSE n.status END,
        cancelled_at = CASE WHEN n.status = 'PENDING' THEN now() ELSE n.cancelled_at END,
        updated_at = now()
    FROM theirs WHERE n.id = theirs.id
    RETURNING n.id
), audiences AS (
    -- The id leaves the audiences of the owner's campaigns: where it was expanded its
    -- place reads [erased] (the redacted notification still counts), where an expanding
    -- campaign has yet to reach it the person leaves the audience, which shrinks by as
    -- many places; a finished walk of every profile forgets its last position.
    UPDATE campaigns c
    SET recipient_ids = CASE
            WHEN c.recipient_ids IS NULL THEN NULL
            WHEN c.status = 'EXPANDING'
                THEN array_replace(c.recipient_ids[1:c.expanded], $2, '[erased]')
                     || array_remove(c.recipient_ids[c.expanded + 1:], $2)
            ELSE array_replace(c.recipient_ids, $2, '[erased]') END,
        audience_size = CASE
            WHEN c.recipient_ids IS NULL OR c.status <> 'EXPANDING' THEN c.audience_size
            ELSE c.audience_size
                 - cardinality(c.recipient_ids[c.expanded + 1:])
                 + cardinality(array_remove(c.recipient_ids[c.expanded + 1:], $2)) END,
        cursor_recipient = CASE WHEN c.status <> 'EXPANDING' AND c.cursor_recipient = $2
                                THEN NULL ELSE c.cursor_recipient END
    WHERE c.owner = $1 AND ($2 = ANY (c.recipient_ids)
                            OR (c.status <> 'EXPANDING' AND c.cursor_recipient = $2))
), attempts AS (
    UPDATE delivery_attempts SET error = NULL
    WHERE notification_id IN (SELECT id FROM theirs) AND error IS NOT NULL
), reservations AS (
    DELETE FROM rate_limit_reservations
    WHERE notification_id IN (SELECT id FROM theirs)
       OR recipient_key = ANY (ARRAY(SELECT hashtextextended(a, 0) FROM unnest($3::text[]) AS a))
), hashed AS (
    UPDATE suppressions s SET address = NULL
    FROM unnest($4::text[], $5::text[]) AS h(hash, channel)
    WHERE s.channel = h.channel AND s.address_hash = h.hash
)
SELECT (SELECT count(*) FROM profile) AS profiles, (SELECT count(*) FROM preferences) AS preferences,
       (SELECT count(*) FROM redacted) AS notifications,
       ARRAY(SELECT id FROM redacted) AS ids
