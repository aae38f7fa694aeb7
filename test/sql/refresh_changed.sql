-- wals_refresh and wals_refresh_items: a model kept fresh without a
-- training, from the ratings changed since its mark.
SET client_min_messages = warning;
CREATE TABLE shop (user_id int, item_id int, r real, ts timestamptz);
INSERT INTO shop
SELECT u, (u * 7 + g * 13) % 60 + 1, 1 + (u + g) % 4, '2026-01-01 00:00:00+00'::timestamptz + (u * 6 + g) * interval '1 second'
FROM generate_series(1, 300) u, generate_series(1, 6) g;
CREATE INDEX ON shop (user_id, item_id);
CREATE INDEX ON shop (ts);
SELECT model FROM wals_train('shop', 'user_id', 'item_id', 'r', factors => 6, iterations => 4,
    solver => 'cholesky', changed_col => 'ts');
-- the mark is the highest ts the training read, in ISO form and UTC
-- whatever the session's settings
SELECT changed_col, changed_mark, serving_version, refreshed_at, refreshed_ratings
FROM wals_models WHERE model = 'shop';
SELECT version AS v0 FROM wals_models WHERE model = 'shop' \gset

-- nothing above the mark: nothing done, the mark kept
SELECT model, ratings, users, new_users, items, new_items, mark FROM wals_refresh('shop');
SELECT version = :v0 AS same_version, serving_version IS NULL AS no_serving_version,
       refreshed_at IS NOT NULL AS refreshed
FROM wals_models WHERE model = 'shop';

-- user 5 rates more and changes a rating in place, user 1000 is new,
-- items 500 and 501 are new (501 rated by the new user alone); another
-- DateStyle and TimeZone change neither the mark nor what it means
SET DateStyle = 'SQL, DMY';
SET TimeZone = 'America/New_York';
INSERT INTO shop VALUES (5, 1, 4, '2026-02-01 00:00:00+00'), (5, 500, 3, '2026-02-01 00:00:01+00'),
    (1000, 3, 2, '2026-02-01 00:00:02+00'), (1000, 500, 1, '2026-02-01 00:00:03+00'),
    (1000, 501, 2, '2026-02-01 00:00:04+00'), (1000, 501, 1, '2026-02-01 00:00:05+00');
UPDATE shop SET r = 4, ts = '2026-02-01 00:00:06+00' WHERE user_id = 5 AND item_id = 2;
CREATE TEMP TABLE before_users AS SELECT * FROM shop_user_factors;
CREATE TEMP TABLE before_items AS SELECT * FROM shop_item_factors;
-- the training keeps XᵀX of the users, f x f floats, so that new items are
-- solved without reading every user; solved with every user read instead
-- (the Gram forgotten), they come out the same
SELECT length(user_gram) AS user_gram_bytes FROM wals_model_state s JOIN wals_models m USING (version)
WHERE m.model = 'shop';
BEGIN;
UPDATE wals_model_state SET user_gram = NULL
WHERE version = (SELECT version FROM wals_models WHERE model = 'shop');
SELECT new_items FROM wals_refresh('shop');
SELECT string_agg(array_to_string(factors, ','), ';' ORDER BY item_id) AS loaded
FROM shop_item_factors WHERE item_id >= 500 \gset
SELECT length(user_gram) AS learned_bytes FROM wals_model_state s JOIN wals_models m USING (version)
WHERE m.model = 'shop';
ROLLBACK;
SELECT model, ratings, users, new_users, items, new_items, mark FROM wals_refresh('shop');
WITH l AS (SELECT ord, string_to_array(x, ',')::real[] AS f
           FROM unnest(string_to_array(:'loaded', ';')) WITH ORDINALITY u(x, ord)),
     k AS (SELECT row_number() OVER (ORDER BY item_id) AS ord, factors AS f
           FROM shop_item_factors WHERE item_id >= 500)
SELECT count(DISTINCT ord) AS items, max(abs(a - b)) < 1e-4 AS same_as_every_user_read
FROM l JOIN k USING (ord), unnest(l.f, k.f) p(a, b);
SELECT changed_mark, refreshed_ratings, users, items, serving_version > :v0 AS new_serving_version,
       version = :v0 AS same_version
FROM wals_models WHERE model = 'shop';
RESET DateStyle;
RESET TimeZone;

-- the users named have the factors fold-in gives from all their ratings
-- now (the pairs read again merged as a training merges them: user 1000
-- rated item 501 twice); no one else moved, and no known item
SELECT u AS user_id,
       (SELECT array_agg(item_id ORDER BY item_id) FROM wals_recommend(u, 5, 'shop')) =
       (SELECT array_agg(item_id ORDER BY item_id) FROM wals_recommend_items(
            (SELECT array_agg(item_id) FROM shop WHERE user_id = u),
            (SELECT array_agg(r) FROM shop WHERE user_id = u), 5, 'shop')) AS same_as_fold_in
FROM unnest('{5, 1000}'::int[]) u;
SELECT max(abs(wals_predict(1000, i, 'shop') - s.score)) < 1e-4 AS same_scores
FROM wals_recommend_items('{3, 500, 501, 501}', '{2, 1, 2, 1}', 70, 'shop', exclude_rated => false) s(i, score);
SELECT count(*) AS others_moved FROM shop_user_factors f JOIN before_users b USING (user_id)
WHERE f.factors <> b.factors AND user_id NOT IN (5, 1000);
SELECT count(*) AS known_items_moved FROM shop_item_factors f JOIN before_items b USING (item_id)
WHERE f.factors <> b.factors;
-- the new items have factors, are served at once, and the users' rated
-- items name them
SELECT item_id FROM shop_item_factors WHERE item_id >= 500 ORDER BY 1;
SELECT count(*) AS served FROM wals_recommend(1000, 70, 'shop', exclude_rated => false)
WHERE item_id IN (500, 501);
SELECT r.* FROM wals_rated_items(1000, 'shop') r ORDER BY 1;
SELECT count(*) AS rated_served FROM wals_recommend(5, 70, 'shop') WHERE item_id IN (1, 2, 500);
-- the shared items of the refresh's serving version were patched, not
-- read again: the same as a copy read from the table, YᵀY included
CREATE TEMP TABLE patched AS
SELECT 'recommend' AS f, item_id, score FROM wals_recommend(1000, 70, 'shop', exclude_rated => false)
UNION ALL
SELECT 'fold-in', item_id, score FROM wals_recommend_items('{1, 500}', '{2, 1}', 70, 'shop', exclude_rated => false);
SET wals.shared_items = off;
SELECT count(*) AS rows, max(abs(p.score - r.score)) < 1e-5 AS same_scores
FROM patched p JOIN (
  SELECT 'recommend' AS f, item_id, score FROM wals_recommend(1000, 70, 'shop', exclude_rated => false)
  UNION ALL
  SELECT 'fold-in', item_id, score FROM wals_recommend_items('{1, 500}', '{2, 1}', 70, 'shop', exclude_rated => false)
) r USING (f, item_id);
RESET wals.shared_items;

-- solve_items => 'touched' solves every item named from all of its
-- ratings; on a model trained by Cholesky, an item's factors then are
-- what the training's last item half-sweep gave it, from the same users
UPDATE shop SET ts = '2026-03-01 00:00:00+00' WHERE item_id = 7;
SELECT model, ratings, users, new_users, items, new_items FROM wals_refresh('shop', 'touched');
SELECT count(*) AS item_7_moved FROM shop_item_factors f JOIN before_items b USING (item_id)
WHERE f.factors <> b.factors AND item_id = 7;
-- the users are solved before the items, against item 7 as it was: each
-- of its raters keeps it among their rated items
SELECT count(*) AS raters, count(*) FILTER (WHERE EXISTS (
         SELECT FROM wals_rated_items(u.user_id, 'shop') ri WHERE ri.item_id = 7)) AS keep_item_7
FROM (SELECT DISTINCT user_id FROM shop WHERE item_id = 7) u;

-- solve_items => 'changed', the default, solves a known item when the rows
-- above the mark name a tenth of its ratings or more, as the catalog
-- counts them (an int4 for each item): 5 of item 9's 30 are, 1 of item
-- 10's is not
SELECT length(item_counts) = 4 * items AS counted_per_item
FROM wals_model_state s JOIN wals_models m USING (version) WHERE m.model = 'shop';
CREATE TEMP TABLE before_changed AS SELECT * FROM shop_item_factors;
UPDATE shop SET ts = '2026-03-02 00:00:00+00'
WHERE (item_id = 9 AND user_id IN (SELECT user_id FROM shop WHERE item_id = 9 ORDER BY 1 LIMIT 5))
   OR (item_id = 10 AND user_id = (SELECT min(user_id) FROM shop WHERE item_id = 10));
BEGIN;
SELECT ratings, items, new_items FROM wals_refresh('shop', 'new');
ROLLBACK;
SELECT ratings, items, new_items FROM wals_refresh('shop');
SELECT item_id FROM shop_item_factors f JOIN before_changed b USING (item_id)
WHERE f.factors <> b.factors ORDER BY 1;
-- a version without its state (a model of 0.6.0, or restored) has the
-- counts made in the source and the Gram from the users by the first
-- refresh, and kept; counted as a training counts, a pair once however
-- many rows it has (item 501's one pair has two, which the refresh does
-- not name)
DELETE FROM wals_model_state WHERE version = (SELECT version FROM wals_models WHERE model = 'shop');
UPDATE shop SET ts = '2026-03-03 00:00:00+00'
WHERE item_id = 11 AND user_id IN (SELECT user_id FROM shop WHERE item_id = 11 ORDER BY 1 LIMIT 4);
SELECT ratings, items FROM wals_refresh('shop');
SELECT length(item_counts) = 4 * items AS counted_again, user_gram IS NOT NULL AS gram_learned
FROM wals_model_state s JOIN wals_models m USING (version) WHERE m.model = 'shop';
SELECT count(*) AS item_501_rows, count(DISTINCT user_id) AS item_501_pairs FROM shop
WHERE item_id = 501;
SELECT get_byte(item_counts, 4 * p.i) + 256 * get_byte(item_counts, 4 * p.i + 1) AS item_501_count
FROM wals_model_state s JOIN wals_models m USING (version),
     (SELECT count(*)::int AS i FROM shop_item_factors WHERE item_id < 501) p
WHERE m.model = 'shop';
-- a rating changed in place is a pair its user had rated already: the
-- count of its item stays what a training would count
CREATE TEMP VIEW item_11_count AS
SELECT get_byte(item_counts, 4 * p.i) + 256 * get_byte(item_counts, 4 * p.i + 1) AS n
FROM wals_model_state s JOIN wals_models m USING (version),
     (SELECT count(*)::int AS i FROM shop_item_factors WHERE item_id < 11) p
WHERE m.model = 'shop';
CREATE TEMP TABLE item_11_before AS SELECT n FROM item_11_count;
UPDATE shop SET ts = '2026-03-04 00:00:00+00'
WHERE item_id = 11 AND user_id IN (SELECT user_id FROM shop WHERE item_id = 11 ORDER BY 1 LIMIT 4);
SELECT ratings FROM wals_refresh('shop');
SELECT c.n = b.n AS item_11_count_kept,
       c.n = (SELECT count(DISTINCT user_id) FROM shop WHERE item_id = 11) AS as_trained
FROM item_11_count c, item_11_before b;
DROP VIEW item_11_count;
DROP TABLE item_11_before;

-- wals_refresh_items on a fresh training: items solved again against the
-- final user factors give back the factors the training stored
CREATE TABLE exact AS SELECT user_id, item_id, r FROM shop WHERE item_id < 500;
SELECT model FROM wals_train('exact', 'user_id', 'item_id', 'r', factors => 6, iterations => 3,
    solver => 'cholesky');
CREATE TEMP TABLE trained AS SELECT * FROM exact_item_factors;
-- items 1 and 2, whose ratings are read through a query, and then every
-- item, which hold the whole source and are read as a training reads it
SELECT wals_refresh_items('{1, 2}', 'exact') AS stored;
SELECT max(abs(a - b)) < 1e-4 AS same_factors
FROM trained t JOIN exact_item_factors e USING (item_id), unnest(t.factors, e.factors) p(a, b)
WHERE item_id IN (1, 2);
SELECT wals_refresh_items((SELECT array_agg(item_id) FROM exact_item_factors), 'exact') AS stored;
SELECT max(abs(a - b)) < 1e-4 AS same_factors
FROM trained t JOIN exact_item_factors e USING (item_id), unnest(t.factors, e.factors) p(a, b);
-- the same with the frequency-scaled regularization, whose scale counts
-- every user, not the raters read
SELECT model FROM wals_train('exact', 'user_id', 'item_id', 'r', model => 'exact_nu', factors => 6,
    iterations => 3, solver => 'cholesky', regularization_exponent => 0.5);
CREATE TEMP TABLE trained_nu AS SELECT * FROM exact_nu_item_factors;
SELECT wals_refresh_items((SELECT array_agg(item_id) FROM exact_nu_item_factors), 'exact_nu') AS stored;
SELECT max(abs(a - b)) < 1e-4 AS same_factors
FROM trained_nu t JOIN exact_nu_item_factors e USING (item_id), unnest(t.factors, e.factors) p(a, b);
SELECT wals_drop_model('exact_nu');
-- an item left without a rater has no factors, as after a training; an
-- item never rated stores nothing, nor one that the int column of the
-- source cannot hold
DELETE FROM exact WHERE item_id = 3;
SET client_min_messages = notice;
SELECT wals_refresh_items('{3, 3, 99999, 9999999999, -9999999999}', 'exact') AS stored;
SET client_min_messages = warning;
SELECT count(*) AS rows_3, (SELECT items FROM wals_models WHERE model = 'exact') AS items,
       (SELECT count(*) FROM exact_item_factors) AS counted
FROM exact_item_factors WHERE item_id = 3;
-- wals_refresh_users forgets the kept Gram, which the next refresh learns again
SELECT wals_refresh_users('{1}', 'exact') AS stored;
SELECT user_gram IS NULL AS forgotten FROM wals_model_state s JOIN wals_models m USING (version)
WHERE m.model = 'exact';
-- a source with one row per pair, by a unique index, reads no pair again:
-- a rating updated in place is taken as it is
CREATE TABLE stock (user_id int, item_id int, r real, ts bigint, PRIMARY KEY (user_id, item_id));
INSERT INTO stock SELECT user_id, item_id, r, 1 FROM exact WHERE r IS NOT NULL
ON CONFLICT DO NOTHING;
SELECT model FROM wals_train('stock', 'user_id', 'item_id', 'r', factors => 6, iterations => 3,
    solver => 'cholesky', changed_col => 'ts');
UPDATE stock SET r = 9, ts = 2 WHERE user_id = 5 AND item_id = (SELECT min(item_id) FROM stock WHERE user_id = 5);
INSERT INTO stock VALUES (5, 777, 2, 2);
SELECT ratings, users, new_items FROM wals_refresh('stock');
SELECT (SELECT array_agg(item_id ORDER BY item_id) FROM wals_recommend(5, 5, 'stock')) =
       (SELECT array_agg(item_id ORDER BY item_id) FROM wals_recommend_items(
            (SELECT array_agg(item_id) FROM stock WHERE user_id = 5),
            (SELECT array_agg(r) FROM stock WHERE user_id = 5), 5, 'stock')) AS same_as_fold_in;
SELECT r.* FROM wals_rated_items(5, 'stock') r WHERE rating = 9 OR item_id = 777 ORDER BY 1;
SELECT wals_drop_model('stock');
DROP TABLE stock;
-- a frequency-scaled model's refreshed user is its fold-in too
CREATE TABLE nu AS SELECT user_id, item_id, r, 1 AS ts FROM exact;
SELECT model FROM wals_train('nu', 'user_id', 'item_id', 'r', factors => 6, iterations => 3,
    solver => 'cholesky', regularization_exponent => 0.5, changed_col => 'ts');
INSERT INTO nu VALUES (5, 1, 4, 2), (5, 2, 1, 2);
SELECT ratings, users FROM wals_refresh('nu');
SELECT max(abs(wals_predict(5, i, 'nu') - s.score)) < 1e-4 AS same_scores
FROM wals_recommend_items((SELECT array_agg(item_id) FROM nu WHERE user_id = 5),
                          (SELECT array_agg(r) FROM nu WHERE user_id = 5), 70, 'nu',
                          exclude_rated => false) s(i, score);
SELECT wals_drop_model('nu');
DROP TABLE nu;
-- a model of the subspace solver refreshes its users too
CREATE TABLE sub AS SELECT user_id, item_id, r, 1 AS ts FROM exact;
SELECT model FROM wals_train('sub', 'user_id', 'item_id', 'r', factors => 6, iterations => 2,
    solver => 'subspace', block_size => 2, changed_col => 'ts');
INSERT INTO sub VALUES (5, 1, 4, 2), (4242, 1, 3, 2);
SELECT ratings, users, new_users FROM wals_refresh('sub');
SELECT wals_drop_model('sub');
DROP TABLE sub;
-- a model without a changed column is refreshed by ids only
SELECT * FROM wals_refresh('exact');
\echo :LAST_ERROR_SQLSTATE

-- errors
SELECT * FROM wals_refresh('shop', 'all');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_refresh('shop', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_refresh('missing');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_refresh_items(NULL, 'shop');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_refresh_items('{1,NULL}', 'shop');
\echo :LAST_ERROR_SQLSTATE
SELECT model FROM wals_train('shop', 'user_id', 'item_id', 'r', model => 'bad', changed_col => 'r');
\echo :LAST_ERROR_SQLSTATE
SELECT model FROM wals_train('shop', 'user_id', 'item_id', 'r', model => 'bad', changed_col => 'nope');
\echo :LAST_ERROR_SQLSTATE
-- a retraining keeps the changed column and takes a new mark
INSERT INTO shop VALUES (6, 1, 1, '2026-04-01 00:00:00+00');
SELECT model FROM wals_retrain('shop');
SELECT changed_col, changed_mark, serving_version, refreshed_ratings FROM wals_models WHERE model = 'shop';
-- a retraining after the column was dropped goes on without one
CREATE TABLE gone AS SELECT * FROM shop;
SELECT model FROM wals_train('gone', 'user_id', 'item_id', 'r', factors => 4, iterations => 1,
    changed_col => 'ts');
ALTER TABLE gone DROP COLUMN ts;
SET client_min_messages = notice;
\set VERBOSITY terse
SELECT model FROM wals_retrain('gone', iterations => 1);
\set VERBOSITY default
SET client_min_messages = warning;
SELECT changed_col, changed_mark FROM wals_models WHERE model = 'gone';
SELECT wals_drop_model('gone');
DROP TABLE gone;
-- a role that may read the model but does not own it cannot refresh it
CREATE ROLE wals_refresh_outsider;
GRANT SELECT ON shop, shop_user_factors, shop_item_factors TO wals_refresh_outsider;
SET ROLE wals_refresh_outsider;
SELECT * FROM wals_refresh('shop');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_refresh_items('{1}', 'shop');
\echo :LAST_ERROR_SQLSTATE
-- nor read, nor change, what wals keeps of a version for its refreshes
SELECT count(*) FROM wals_model_state;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM wals_model_state;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- a retraining and a drop leave nothing of the versions before, nor of
-- those whose catalog row was deleted by hand (attach.sql's)
SELECT 1 FROM wals_retrain('shop');
SELECT count(*) AS orphans FROM wals_model_state WHERE version NOT IN (SELECT version FROM wals_models);
SELECT wals_drop_model('shop'), wals_drop_model('exact');
SELECT count(*) AS orphans FROM wals_model_state WHERE version NOT IN (SELECT version FROM wals_models);
DROP TABLE shop, exact, before_users, before_items, trained, trained_nu, patched;
DROP ROLE wals_refresh_outsider;

-- more users than a batch (2,048) after a retraining, whose old rows the
-- writer's index scan finds dead and marks as it goes, past each batch;
-- every user is written once, with the rating added
CREATE TABLE many (user_id int, item_id int, r real, ts bigint);
INSERT INTO many SELECT u, (u * 7 + g) % 40 + 1, 1, u * 3 + g
FROM generate_series(1, 2500) u, generate_series(1, 3) g;
CREATE INDEX ON many (ts);
SELECT 1 FROM wals_train('many', 'user_id', 'item_id', 'r', factors => 4, iterations => 2,
    changed_col => 'ts');
SELECT 1 FROM wals_retrain('many');
INSERT INTO many SELECT u, (u * 7 + 5) % 40 + 1, 1, 100000 + u FROM generate_series(1, 2500) u;
SELECT ratings, users, new_users, items, new_items FROM wals_refresh('many');
SELECT count(*) AS users, count(*) FILTER (WHERE array_length(factors, 1) = 4) AS with_factors
FROM many_user_factors;
SELECT count(*) AS scored FROM wals_recommend(1, 40, model => 'many', exclude_rated => false);
SELECT count(*) AS left_unrated FROM wals_recommend(1, 40, model => 'many');
SELECT wals_drop_model('many');
DROP TABLE many;
