-- Sets channel $1's buckets to the configured rates: transactional $2 and bulk $3 tokens
-- per second, each with a burst of one second of its rate. Existing tokens are kept (up
-- to the new burst), so a restarting sweeper does not hand out a fresh burst.
INSERT INTO token_buckets AS b (channel, class, rate, burst, tokens)
VALUES ($1, 'TRANSACTIONAL', $2, $2, $2), ($1, 'BULK', $3, $3, $3)
ON CONFLICT (channel, class) DO UPDATE
SET rate = excluded.rate, burst = excluded.burst, tokens = least(b.tokens, excluded.burst)
