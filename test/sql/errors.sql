-- Bad input: every case gets an error with the right SQLSTATE (echoed after
-- it), a message naming the argument, and changes nothing.
-- Trainings report each iteration in a NOTICE with timings; those are
-- shown only where a test is about them.
SET client_min_messages = warning;
CREATE TABLE good AS
SELECT u AS user_id, (u * 3 + g) % 20 + 1 AS item_id, g::real AS rating, 'x'::text AS label,
       (u * 0.5)::real AS fractional
FROM generate_series(1, 50) u, generate_series(1, 4) g;
SELECT model FROM wals_train('good', 'user_id', 'item_id', 'rating', factors => 4, iterations => 2);
SELECT version AS v1 FROM wals_models WHERE model = 'good' \gset

-- the source and its columns
SELECT * FROM wals_train('missing', 'user_id', 'item_id');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train(NULL, 'user_id', 'item_id');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train(123456789::oid::regclass, 'user_id', 'item_id');
\echo :LAST_ERROR_SQLSTATE
CREATE SEQUENCE not_a_table;
SELECT * FROM wals_train('not_a_table', 'user_id', 'item_id');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'nobody', 'item_id');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'ctid');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', 'nothing');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', NULL, 'item_id');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'label', 'item_id');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'fractional');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', 'label');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'user_id');
\echo :LAST_ERROR_SQLSTATE

-- hyperparameters
SELECT * FROM wals_train('good', 'user_id', 'item_id', factors => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', factors => 100000);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', factors => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', iterations => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', regularization => -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', regularization => 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', alpha => 'Infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', unobserved_weight => -0.5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', feedback => 'stars');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', solver => 'lu');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', cg_steps => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', workers => -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', tolerance => -1);
\echo :LAST_ERROR_SQLSTATE
-- a training whose factors and scratch alone exceed wals.max_memory is
-- refused before it allocates (its ratings could go to temporary files)
SET wals.max_memory = '1kB';
SELECT * FROM wals_train('good', 'user_id', 'item_id', 'rating', factors => 4);
\echo :LAST_ERROR_SQLSTATE
RESET wals.max_memory;
SELECT * FROM wals_train('good', 'user_id', 'item_id', seed => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', 'rating', factors => 8, warm_start => true);
\echo :LAST_ERROR_SQLSTATE

-- devices: a GPU asked for where none is usable (the engine is pointed at a
-- missing file, so that the output is the same on machines with a GPU)
SET wals.cuda_library = '/nonexistent/wals_cuda.so';
SELECT * FROM wals_train('good', 'user_id', 'item_id', device => 'tpu');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', device => 'gpu');
\echo :LAST_ERROR_SQLSTATE
SET wals.device = 'gpu';
SELECT * FROM wals_train('good', 'user_id', 'item_id');
\echo :LAST_ERROR_SQLSTATE
RESET wals.device;
SET wals.device = 'tpu';
SELECT model, device FROM wals_train('good', 'user_id', 'item_id', 'rating', model => 'on_cpu',
    factors => 4, iterations => 1, device => 'cpu');
SELECT model, device FROM wals_train('good', 'user_id', 'item_id', 'rating', model => 'on_cpu',
    factors => 4, iterations => 1, device => 'auto');
SELECT wals_drop_model('on_cpu');
RESET wals.cuda_library;

-- model names
SELECT * FROM wals_train('good', 'user_id', 'item_id', model => '');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('good', 'user_id', 'item_id', model => repeat('m', 51));
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE taken_user_factors (id int);
SELECT * FROM wals_train('good', 'user_id', 'item_id', model => 'taken');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE taken_user_factors;

-- the ratings themselves
CREATE TABLE with_nulls AS SELECT * FROM good;
INSERT INTO with_nulls VALUES (NULL, 1, 1), (1, NULL, 1), (NULL, NULL, 1);
-- progress and skipped rows are NOTICEs, their figures in DETAIL
SET client_min_messages = notice;
\set VERBOSITY terse
SELECT model, ratings FROM wals_train('with_nulls', 'user_id', 'item_id', 'rating',
    factors => 4, iterations => 1);
\set VERBOSITY default
SET client_min_messages = warning;
INSERT INTO with_nulls VALUES (1, 1, NULL);
SELECT * FROM wals_train('with_nulls', 'user_id', 'item_id', 'rating', factors => 4);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE not_finite (user_id int, item_id int, rating real);
INSERT INTO not_finite VALUES (1, 1, 1), (2, 2, 'NaN');
SELECT * FROM wals_train('not_finite', 'user_id', 'item_id', 'rating');
\echo :LAST_ERROR_SQLSTATE
UPDATE not_finite SET rating = 'Infinity' WHERE user_id = 2;
SELECT * FROM wals_train('not_finite', 'user_id', 'item_id', 'rating', feedback => 'explicit');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE huge (user_id int, item_id int, rating float8);
INSERT INTO huge VALUES (1, 1, 1e300);
SELECT * FROM wals_train('huge', 'user_id', 'item_id', 'rating');
\echo :LAST_ERROR_SQLSTATE
-- a negative rating is a dislike under implicit feedback, a value under
-- explicit feedback: both train
UPDATE not_finite SET rating = -1 WHERE user_id = 2;
SELECT model, ratings FROM wals_train('not_finite', 'user_id', 'item_id', 'rating',
    model => 'dislike', factors => 2, iterations => 1);
SELECT wals_drop_model('dislike');
SELECT model, ratings FROM wals_train('not_finite', 'user_id', 'item_id', 'rating',
    feedback => 'explicit', factors => 2, iterations => 1);
CREATE TABLE empty (user_id int, item_id int, rating real);
SELECT * FROM wals_train('empty', 'user_id', 'item_id', 'rating');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO empty VALUES (NULL, 1, 1);
SET client_min_messages = notice;
SELECT * FROM wals_train('empty', 'user_id', 'item_id', 'rating');
\echo :LAST_ERROR_SQLSTATE
SET client_min_messages = warning;

-- none of the failures above touched the model
SELECT version = :v1 AS unchanged FROM wals_models WHERE model = 'good';
SELECT count(*) FROM wals_models;

-- serving
SELECT * FROM wals_recommend(1, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend(1, -5, 'good');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend(1, NULL, 'good');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend(1, 5, 'good', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend(1, 5, 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_predict(1, 1, 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend(1, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT wals_drop_model('nope');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_drop_model(NULL);
\echo :LAST_ERROR_SQLSTATE
-- a model whose source is gone still serves, rated items left out (the
-- model keeps them), but cannot refresh its users
DROP TABLE huge;
SELECT model FROM wals_train('not_finite', 'user_id', 'item_id', 'rating', model => 'orphan',
    feedback => 'explicit', factors => 2, iterations => 1);
DROP TABLE not_finite;
SELECT count(*) FROM wals_recommend(1, 5, 'orphan', exclude_rated => false);
SELECT count(*) FROM wals_recommend(1, 5, 'orphan');
SELECT wals_refresh_users('{1}', 'orphan');
\echo :LAST_ERROR_SQLSTATE

-- privileges: a role that may not create in the model's schema cannot
-- train, and one that may not read the source cannot train from it
CREATE ROLE wals_reader;
SET ROLE wals_reader;
SELECT * FROM wals_train('good', 'user_id', 'item_id', model => 'stolen');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
CREATE SCHEMA reader AUTHORIZATION wals_reader;
SET ROLE wals_reader;
SELECT * FROM wals_train('good', 'user_id', 'item_id', model => 'reader.stolen');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP SCHEMA reader;
DROP ROLE wals_reader;

-- quoted identifiers: schema, table, columns and model with spaces, quotes and capitals
CREATE SCHEMA "Odd Schema";
CREATE TABLE "Odd Schema"."My ""Ratings""" ("User Id" int, "Item;Id" bigint, "Stars!" numeric);
INSERT INTO "Odd Schema"."My ""Ratings""" SELECT user_id, item_id, rating FROM good;
SELECT model, users, items FROM wals_train('"Odd Schema"."My ""Ratings"""', 'User Id', 'Item;Id',
    'Stars!', factors => 4, iterations => 2);
SELECT schema, source, user_factors FROM wals_models WHERE model = 'My "Ratings"';
-- (the model goes where CREATE TABLE would put a table, not beside its source)
SELECT count(*) FROM "My ""Ratings""_item_factors";
SELECT count(*) FROM wals_recommend(1, 3, 'My "Ratings"');
SELECT model FROM wals_train('"Odd Schema"."My ""Ratings"""', 'User Id', 'Item;Id',
    model => 'x"; DROP TABLE good; --', factors => 2, iterations => 1);
SELECT count(*) FROM good;
SELECT count(*) FROM wals_recommend(1, 3, 'x"; DROP TABLE good; --');

-- a factor table edited by hand into something that is not a model
UPDATE good_user_factors SET factors = '{1,2}' WHERE user_id = 1;
SELECT * FROM wals_recommend(1, 3, 'good');
\echo :LAST_ERROR_SQLSTATE
-- (read by a backend of its own: the copy of the items shared by every
-- backend is the training's)
UPDATE good_item_factors SET factors = '{1,NULL,3,4}' WHERE item_id = 2;
SET wals.shared_items = off;
SELECT wals_predict(2, 2, 'good');
\echo :LAST_ERROR_SQLSTATE

SELECT count(*) AS dropped FROM (SELECT wals_drop_model(format('%I.%I', schema, model)) FROM wals_models) d;
DROP SCHEMA "Odd Schema" CASCADE;
DROP TABLE good, with_nulls, empty;
DROP SEQUENCE not_a_table;
