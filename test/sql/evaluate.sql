-- wals_evaluate against cases computed by hand: factors set by hand so that
-- every score is known.
SET client_min_messages = warning;
CREATE TABLE ev_train (user_id int, item_id int, rating real);
-- user 4, who is not tested, makes items 3 to 5 known to the model
INSERT INTO ev_train VALUES (1, 1, 1), (2, 2, 1), (3, 1, 1), (4, 3, 1), (4, 4, 1), (4, 5, 1);
SELECT model, users, items FROM wals_train('ev_train', 'user_id', 'item_id', 'rating', model => 'ev',
    factors => 2, iterations => 1);
SELECT model FROM wals_train('ev_train', 'user_id', 'item_id', 'rating', model => 'evx',
    factors => 2, iterations => 1, feedback => 'explicit');
-- item i scores i for users 1 and 3, -i for user 2
UPDATE ev_item_factors SET factors = ARRAY[item_id, 0]::real[];
UPDATE ev_user_factors SET factors = CASE user_id WHEN 2 THEN '{-1,0}' ELSE '{1,0}' END::real[];
UPDATE evx_item_factors SET factors = ARRAY[item_id, 0]::real[];
UPDATE evx_user_factors SET factors = CASE user_id WHEN 2 THEN '{-1,0}' ELSE '{1,0}' END::real[];
-- (read by a backend of its own: the copy of the items shared by every
-- backend is the training's)
SET wals.shared_items = off;
CREATE TABLE ev_test (u bigint, i bigint, stars real);
INSERT INTO ev_test VALUES
  (1, 5, 4), (1, 2, 2), (1, 99, 3),   -- item 99 is unknown to the model
  (2, 3, 1),
  (3, 1, 5),                          -- rated in training: nothing left to rank
  (9, 1, 1);                          -- user 9 is unknown to the model
-- k = 2.  User 1: items 2..5 eligible, ranked 5, 4, 3, 2; relevant {2, 5}:
--   one hit (5) at rank 1: precision 1/2, recall 1/min(2, 2) = 1/2,
--   ndcg 1 / (1 + 1/log2 3) = 0.6131, map (1/2)(1/1) = 1/2,
--   auc: 5 beats 3 and 4, 2 beats neither: 2/4.
-- User 2: items 1, 3, 4, 5 eligible, ranked 1, 3, 4, 5; relevant {3}:
--   one hit at rank 2: precision 1/2, recall 1/1, ndcg (1/log2 3) / 1 = 0.6309,
--   map (1/1)(1/2) = 1/2, auc: 3 beats 4 and 5, not 1: 2/3.
-- Means over the 2 users: precision 0.5, recall 0.75, ndcg 0.6220, map 0.5,
-- auc 0.5833.
SELECT metric, round(value::numeric, 4) AS value FROM wals_evaluate('ev', 'ev_test', 'u', 'i', k => 2);
-- rmse of an explicit model over the known test cells with a known user:
-- user 1: item 5 scores 5 against 4, item 2 scores 2 against 2; user 2:
-- item 3 scores -3 against 1; user 3: item 1 scores 1 against 5:
-- sqrt((1 + 0 + 16 + 16) / 4) = 2.8723
SELECT metric, round(value::numeric, 4) AS value FROM wals_evaluate('evx', 'ev_test', 'u', 'i', 'stars', 2)
WHERE metric IN ('rmse', 'users');
-- no rmse without ratings, nor for implicit models
SELECT count(*) AS rmse_rows FROM wals_evaluate('evx', 'ev_test', 'u', 'i') WHERE metric = 'rmse';
SELECT count(*) AS rmse_rows FROM wals_evaluate('ev', 'ev_test', 'u', 'i', 'stars') WHERE metric = 'rmse';
-- repeated test rows count once
INSERT INTO ev_test VALUES (2, 3, 1);
SELECT metric, round(value::numeric, 4) AS value FROM wals_evaluate('ev', 'ev_test', 'u', 'i', k => 2)
WHERE metric IN ('recall@2', 'users');
-- an implicit model's held-out dislike (a negative rating) is not relevant:
-- user 1's item 5, its hit, rated -4 leaves item 2 its only relevant item,
-- ranked last: no hit, auc 0/3; user 2 as above.  Means: precision 0.25,
-- recall 0.5, ndcg 0.3155, map 0.25, auc 0.3333.  To an explicit model a
-- negative rating is a value like any, and item 5 stays relevant.
CREATE VIEW ev_dislike AS
SELECT u, i, CASE WHEN u = 1 AND i = 5 THEN -4 ELSE stars END AS stars FROM ev_test;
SELECT metric, round(value::numeric, 4) AS value FROM wals_evaluate('ev', 'ev_dislike', 'u', 'i', 'stars', 2)
WHERE metric IN ('precision@2', 'recall@2', 'ndcg@2', 'map@2', 'auc', 'users');
SELECT metric, round(value::numeric, 4) AS value FROM wals_evaluate('evx', 'ev_dislike', 'u', 'i', 'stars', 2)
WHERE metric IN ('recall@2', 'users');
-- a user whose held-out items are all dislikes has none relevant
CREATE VIEW ev_dislikes_only AS SELECT u, i, -1::real AS stars FROM ev_test WHERE u = 1;
SELECT metric, round(value::numeric, 4) AS value FROM wals_evaluate('ev', 'ev_dislikes_only', 'u', 'i', 'stars', 2)
WHERE metric IN ('users', 'users_without_relevant');
DROP VIEW ev_dislike, ev_dislikes_only;
-- a view, and NULL ids skipped with a NOTICE
CREATE VIEW ev_view AS SELECT * FROM ev_test UNION ALL SELECT NULL, 1, 1;
SET client_min_messages = notice;
\set VERBOSITY terse
SELECT metric, round(value::numeric, 4) AS value FROM wals_evaluate('ev', 'ev_view', 'u', 'i', k => 2)
WHERE metric = 'users';
-- errors
SELECT * FROM wals_evaluate('ev', 'ev_test', 'u', 'i', k => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_evaluate(NULL, 'ev_test', 'u', 'i');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_evaluate('ev', NULL, 'u', 'i');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_evaluate('ev', 'ev_test', NULL, 'i');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_evaluate('ev', 'ev_test', 'u', 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_evaluate('missing', 'ev_test', 'u', 'i');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_evaluate('ev', 'no_such_table', 'u', 'i');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO ev_test VALUES (1, 4, NULL);
SELECT * FROM wals_evaluate('evx', 'ev_test', 'u', 'i', 'stars');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SET client_min_messages = warning;
SELECT wals_drop_model('ev'), wals_drop_model('evx');
DROP VIEW ev_view;
DROP TABLE ev_train, ev_test;
-- Parallel workers score the test users a chunk at a time; each user's sums
-- are added up in user order, so every figure is the same, to the bit, with
-- any number of them: 700 test users, six chunks, an explicit model so that
-- rmse is summed too.
CREATE TABLE evp_train AS
SELECT u AS user_id, (u * 7 + g * 13) % 150 AS item_id, ((u + g) % 5 + 1)::real AS stars
FROM generate_series(1, 700) u, generate_series(1, 10) g;
CREATE TABLE evp_test AS
SELECT u AS user_id, (u * 11 + g * 17 + 3) % 150 AS item_id, ((u * g) % 5 + 1)::real AS stars
FROM generate_series(1, 700) u, generate_series(1, 3) g;
SELECT 1 FROM wals_train('evp_train', 'user_id', 'item_id', 'stars', model => 'evp', factors => 8,
    iterations => 3, feedback => 'explicit');
SET max_parallel_maintenance_workers = 0;
CREATE TEMP TABLE evp_alone AS
SELECT * FROM wals_evaluate('evp', 'evp_test', 'user_id', 'item_id', 'stars', 5);
SET max_parallel_maintenance_workers = 2;
CREATE TEMP TABLE evp_workers AS
SELECT * FROM wals_evaluate('evp', 'evp_test', 'user_id', 'item_id', 'stars', 5);
SELECT a.metric, a.value = w.value AS same, a.value > 0 AS positive
FROM evp_alone a JOIN evp_workers w USING (metric) ORDER BY 1;
RESET max_parallel_maintenance_workers;
SELECT wals_drop_model('evp');
DROP TABLE evp_train, evp_test;
