-- Sharded training over Citus, step 3 of 4: on the coordinator, in database
-- app, as analyst, with the ratings as CSV lines (user_id,item_id,rating) on
-- psql's standard input:
--   psql -h coordinator.example -p 5432 -d app -U analyst -f 3_load.sql < ratings.csv
-- Nothing to replace.  Citus's COPY sends each row straight to the worker
-- holding its shard, many rows a message, to all workers at once.
\copy shop.ratings FROM pstdin WITH (FORMAT csv)
