-- Sharded training, the last step (postgres_fdw's 4 of 4, Citus's 4 of 4):
-- on the coordinator, in database app, as analyst:
--   psql -h coordinator.example -p 5432 -d app -U analyst -f train.sql
-- Nothing to replace.

-- Which servers train, and what each of them reads.
SELECT * FROM wals_shards('shop.ratings');

-- The model goes beside its source, in shop, where analyst may create it.
SELECT model, users, items, ratings, iterations, device
FROM wals_train('shop.ratings', 'user_id', 'item_id', 'rating', model => 'shop.ratings');

SELECT * FROM wals_recommend(42, 10, 'shop.ratings');
