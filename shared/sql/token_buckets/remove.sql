-- Channel $1 has no rate: its buckets go, and its claims are not limited by tokens.
DELETE FROM token_buckets WHERE channel = $1
