-- How many profiles owner $1 has.
SELECT count(*) AS profiles FROM recipients WHERE owner = $1
