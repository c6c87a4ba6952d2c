-- The preferences of profile $2 of owner $1.
SELECT category, channel, opted_in FROM recipient_preferences
WHERE owner = $1 AND recipient_id = $2
ORDER BY category, channel
