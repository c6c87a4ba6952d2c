-- Why (1): the digest's CHANNEL_PAUSED finding could say until when a channel is paused but
-- not since when: a pause extended by every batch that is throttled again looked new each
-- time. `paused_since` is when the current pause began; a longer pause that follows
-- without a gap keeps it.
--
-- Why (2): a call the provider refused for the account's configuration (identity not
-- verified, access denied, sending paused) or throttled only paused the channel and left
-- an attempt row, which retention deletes; nothing counted them over time. Each channel
-- now keeps a running total of both, added by the statement that already records each
-- batch's calls (one row per channel and outcome, written only by a batch that had one).
--
-- Both only add: the previous release's statements name neither, so it keeps working
-- while this one rolls out (a pause it starts has no start until the next one ends).

ALTER TABLE channel_health ADD COLUMN paused_since timestamptz;

CREATE TABLE provider_refusal_counts (
    channel  text   NOT NULL CHECK (channel IN ('EMAIL', 'SMS', 'PUSH')),
    outcome  text   NOT NULL CHECK (outcome IN ('THROTTLED', 'PROVIDER_MISCONFIGURED')),
    calls    bigint NOT NULL CHECK (calls >= 0),
    PRIMARY KEY (channel, outcome)
);
