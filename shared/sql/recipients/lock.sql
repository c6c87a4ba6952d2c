-- The addresses of profile $2 of owner $1, locked until erasure commits.
SELECT email, phone, push_tokens FROM recipients
WHERE owner = $1 AND recipient_id = $2
FOR UPDATE
