-- Serving: wals_recommend, wals_predict, model resolution and drops.
-- Trainings report each iteration in a NOTICE with timings; those are
-- shown only where a test is about them.
SET client_min_messages = warning;
CREATE TABLE plays AS
SELECT u AS user_id, (u * 7 + g * 13) % 40 + 1 AS item_id, (1 + (u + g) % 3) AS n
FROM generate_series(1, 200) u, generate_series(1, 6) g;
SELECT model FROM wals_train('plays', 'user_id', 'item_id', 'n', factors => 6,
    iterations => 4, solver => 'cholesky');

-- k rows, best first, none of them already rated by the user
SELECT count(*), count(DISTINCT item_id) FROM wals_recommend(42, 5);
SELECT bool_and(score >= next_score) AS best_first
FROM (SELECT score, lead(score) OVER () AS next_score FROM wals_recommend(42, 10)) s
WHERE next_score IS NOT NULL;
SELECT count(*) AS rated_recommended FROM wals_recommend(42, 10) r
JOIN plays p ON p.user_id = 42 AND p.item_id = r.item_id;

-- the same scores as the dot products of the stored factors, the same order
-- as an exact scan in SQL
CREATE FUNCTION dot(a real[], b real[]) RETURNS float8 LANGUAGE sql IMMUTABLE
AS $$ SELECT sum(x * y) FROM unnest(a, b) AS t(x, y) $$;
CREATE TEMP TABLE exact_scan AS
SELECT i.item_id, dot(u.factors, i.factors) AS score
FROM plays_user_factors u, plays_item_factors i
WHERE u.user_id = 42 AND i.item_id NOT IN (SELECT item_id FROM plays WHERE user_id = 42);
SELECT max(abs(r.score - e.score)) < 1e-5 AS same_scores
FROM wals_recommend(42, 10) r JOIN exact_scan e USING (item_id);
SELECT min(r.score) >= (SELECT max(score) FROM exact_scan
                        WHERE item_id NOT IN (SELECT item_id FROM wals_recommend(42, 10))) - 1e-5
       AS exact_top_k
FROM wals_recommend(42, 10) r;

-- exclude_rated => false ranks every item, rated ones included
SELECT count(*) FROM wals_recommend(42, 1000, exclude_rated => false);
SELECT count(*) > 0 AS rated_included FROM wals_recommend(42, 10, exclude_rated => false) r
JOIN plays p ON p.user_id = 42 AND p.item_id = r.item_id;
-- k larger than the eligible items returns them all
SELECT count(*) FROM wals_recommend(42, 1000);
SELECT 40 - count(DISTINCT item_id) AS eligible FROM plays WHERE user_id = 42;

-- wals_predict is the dot product; unknown users and items give NULL
SELECT abs(wals_predict(42, 3) - dot(u.factors, i.factors)) < 1e-5 AS predict_is_dot
FROM plays_user_factors u, plays_item_factors i WHERE u.user_id = 42 AND i.item_id = 3;
SELECT wals_predict(100000, 3) IS NULL AS unknown_user, wals_predict(42, 100000) IS NULL AS unknown_item,
       wals_predict(NULL, 3) IS NULL AS null_user;

-- an unknown or NULL user gets an empty result, not an error
SELECT count(*) FROM wals_recommend(100000, 10);
SELECT count(*) FROM wals_recommend(NULL, 10);

-- ties are broken by the lower item id
CREATE TABLE tie_user AS SELECT 1 AS user_id, 1 AS item_id, 1 AS r;
SELECT model FROM wals_train('tie_user', 'user_id', 'item_id', 'r', factors => 2, iterations => 1);
INSERT INTO tie_user_item_factors SELECT i, '{1,1}' FROM generate_series(2, 6) i;
-- (items added by hand: served by a backend that reads the items itself)
SET wals.shared_items = off;
SELECT item_id FROM wals_recommend(1, 3, 'tie_user', exclude_rated => false) WHERE item_id > 1;
-- the shared copy is the training's, without them
RESET wals.shared_items;
SELECT count(*) AS shared_items FROM wals_recommend(1, 10, 'tie_user', exclude_rated => false);

-- model resolution: with several models and no setting, an error lists them
SELECT count(*) FROM wals_recommend(42, 3);
SET wals.default_model = 'plays';
SELECT count(*) FROM wals_recommend(42, 3);
SET wals.default_model = 'missing';
SELECT count(*) FROM wals_recommend(42, 3);
RESET wals.default_model;
SELECT wals_drop_model('tie_user');
-- the only model is used when none is named
SELECT count(*) FROM wals_recommend(42, 3);

-- a retraining committed in this session is seen by the next call
SELECT model FROM wals_train('plays', 'user_id', 'item_id', 'n', factors => 6,
    iterations => 4, solver => 'cholesky', seed => 1);
SELECT max(abs(r.score - dot(u.factors, i.factors))) < 1e-5 AS reloaded
FROM wals_recommend(42, 5) r, plays_user_factors u, plays_item_factors i
WHERE u.user_id = 42 AND i.item_id = r.item_id;

-- a model whose factor tables were dropped by hand
DROP TABLE plays_item_factors;
SELECT count(*) FROM wals_recommend(42, 3);
SELECT wals_predict(42, 3);
-- ... can still be dropped
SET client_min_messages = notice;
SELECT wals_drop_model('plays');
SET client_min_messages = warning;
SELECT count(*) FROM wals_recommend(42, 3);
SELECT wals_drop_model('plays');

DROP FUNCTION dot(real[], real[]);
DROP TABLE plays, tie_user;
