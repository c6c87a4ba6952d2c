-- Sets channel $1's buckets to the configured rates: transactional $2 and bulk $3 tokens
-- per second, each with a burst of one second of its rate. A new bucket starts empty and
-- fills at its rate: sweepers starting together (a deployment, a scale-out) begin at the
-- rate instead of spending a burst at once while their first calls, each slowed by its
-- own connection set-up, bunch into the same second as the next ones. Existing tokens are
-- kept (up to the new burst), so a restarting sweeper does not hand out a fresh burst.
INSERT INTO token_buckets AS b (channel, class, rate, burst, tokens)
VALUES ($1, 'TRANSACTIONAL', $2, $2, 0), ($1, 'BULK', $3, $3, 0)
ON CONFLICT (channel, class) DO UPDATE
SET rate = excluded.rate, burst = excluded.burst, tokens = least(b.tokens, excluded.burst)
