-- Sharded training over postgres_fdw, step 3 of 4: on shard 1, in database
-- app, as the owner of ratings_part (the superuser of 1_shard.sql), with the
-- ratings as CSV lines (user_id,item_id,rating) on psql's standard input:
--   psql -h shard1.example -p 5432 -d app -U postgres -f 3_load_shard1.sql < ratings.csv
-- Nothing to replace.  The rows go straight into this shard, not through
-- the coordinator's partitioned table, which would send them one by one
-- over postgres_fdw's connection: its partition's bounds (users below
-- 1000000) pick them.
\copy ratings_part FROM pstdin WITH (FORMAT csv) WHERE user_id < 1000000
ANALYZE ratings_part;
