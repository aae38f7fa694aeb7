-- Training: the summary row, the catalog, the factor tables, the three
-- feedback variants, both solvers, and the properties of the data path.
-- Trainings report each iteration in a NOTICE with timings; those are
-- shown only where a test is about them.
SET client_min_messages = warning;

CREATE TABLE ratings AS
SELECT u AS user_id, (u * 7 + g * 13) % 60 + 1 AS item_id,
       (1 + (u + g) % 5)::real AS rating
FROM generate_series(1, 300) u, generate_series(1, 10) g;

-- implicit feedback, conjugate gradient (the defaults)
SELECT model, users, items, ratings, factors, iterations, loss > 0 AS loss_positive,
       device, load_s >= 0 AND train_s >= 0 AND store_s >= 0 AS timed,
       total_s >= train_s AS total_covers_train
FROM wals_train('ratings', 'user_id', 'item_id', 'rating', factors => 8, iterations => 5);

SELECT schema, model, source, user_col, item_col, rating_col, feedback, factors, iterations,
       max_iterations, regularization, alpha, unobserved_weight, solver, cg_steps, seed,
       tolerance, warm_start, users, items, ratings, device, workers,
       trained_by = current_user AS trained_by_me, user_factors, item_factors,
       loss = (SELECT loss FROM wals_training_log l WHERE l.schema = m.schema
               AND l.model = m.model AND l.version = m.version AND l.iteration = 5) AS loss_logged
FROM wals_models m;

SELECT iteration, seconds >= 0 AS timed FROM wals_training_log ORDER BY iteration;
-- seconds are kept to the microsecond, and print without a clock's noise
SELECT bool_and(s = round(s::numeric, 6)::float8) AS whole_microseconds
FROM (SELECT unnest(ARRAY[load_s, train_s, store_s, total_s]) AS s FROM wals_models
      UNION ALL SELECT seconds FROM wals_training_log) t;

-- the factor tables: one row per user and per item, f reals each, keyed by
-- id; each user's row also keeps the items it rated, with their merged
-- ratings, packed
\d ratings_user_factors
\d ratings_item_factors
SELECT count(*), min(array_length(factors, 1)), max(array_length(factors, 1))
FROM ratings_user_factors;
SELECT count(*), min(item_id), max(item_id) FROM ratings_item_factors;
-- wals_rated_items shows them: the distinct items of each user, ratings summed
SELECT count(*) AS cells_differ FROM (
    (SELECT user_id, item_id, sum(rating)::real FROM ratings GROUP BY 1, 2
     EXCEPT ALL
     SELECT f.user_id, r.* FROM ratings_user_factors f, wals_rated_items(f.user_id, 'ratings') r)
    UNION ALL
    (SELECT f.user_id, r.* FROM ratings_user_factors f, wals_rated_items(f.user_id, 'ratings') r
     EXCEPT ALL
     SELECT user_id, item_id, sum(rating)::real FROM ratings GROUP BY 1, 2)) d;
SELECT octet_length(rated) < 3 * array_length(array_agg(item_id), 1) AS packed_small
FROM ratings_user_factors f JOIN ratings r USING (user_id) WHERE f.user_id = 1 GROUP BY rated;
SELECT count(*) AS unknown_user FROM wals_rated_items(999999, 'ratings');
SELECT tableowner = current_user AS owned_by_me FROM pg_tables
WHERE tablename = 'ratings_user_factors';

-- Cholesky: the exact solver never increases the loss from one sweep to the next
SELECT model, iterations FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
    model => 'exact', factors => 8, iterations => 6, solver => 'cholesky');
SELECT bool_and(loss <= prev * (1 + 1e-6)) AS loss_non_increasing
FROM (SELECT loss, lag(loss) OVER (ORDER BY iteration) AS prev
      FROM wals_training_log WHERE model = 'exact') s WHERE prev IS NOT NULL;

-- enough CG steps reach the Cholesky solution
SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
    model => 'cg_many', factors => 8, iterations => 6, solver => 'cg', cg_steps => 40);
SELECT max(abs(wals_predict(u, i, 'exact') - wals_predict(u, i, 'cg_many'))) < 1e-3 AS cg_matches_cholesky
FROM generate_series(1, 300, 7) u, generate_series(1, 60, 5) i;

-- retraining replaces the model: a new version, the same tables, still one row
SELECT version AS v1 FROM wals_models WHERE model = 'exact' \gset
SELECT iterations FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
    model => 'exact', factors => 4, iterations => 2, solver => 'cholesky', replace => true);
SELECT version > :v1 AS newer, factors, iterations FROM wals_models WHERE model = 'exact';
SELECT min(array_length(factors, 1)) FROM exact_item_factors;
SELECT count(DISTINCT version) FROM wals_training_log WHERE model = 'exact';

-- warm start: one iteration from the stored factors beats one from scratch
SELECT loss AS cold FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
    model => 'cold', factors => 8, iterations => 1, solver => 'cholesky') \gset
SELECT loss < :cold AS warm_is_better, iterations
FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'cg_many', factors => 8,
    iterations => 1, solver => 'cholesky', warm_start => true);
SELECT warm_start FROM wals_models WHERE model = 'cg_many';
-- a model that does not exist yet starts fresh
SET client_min_messages = notice;
\set VERBOSITY terse
SELECT loss = :cold AS same_as_cold FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
    model => 'new_warm', factors => 8, iterations => 1, solver => 'cholesky', warm_start => true);
\set VERBOSITY default
SET client_min_messages = warning;

-- a nightly retraining from the stored factors stops early at the loss a
-- cold start reaches only after more iterations
SELECT iterations AS cold_iterations, loss AS cold_loss
FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'nightly', factors => 8,
    iterations => 50, solver => 'cholesky', tolerance => 0.001) \gset
SELECT iterations < :cold_iterations AS fewer_iterations, loss <= :cold_loss AS as_low_a_loss
FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'nightly', factors => 8,
    iterations => 50, solver => 'cholesky', tolerance => 0.001, warm_start => true);
SELECT :cold_iterations > 2 AS cold_needs_several;

-- explicit feedback (ALS-WR): predictions approach the ratings
SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
    model => 'stars', feedback => 'explicit', factors => 8, iterations => 10,
    regularization => 0.01, solver => 'cholesky');
SELECT feedback, unobserved_weight FROM wals_models WHERE model = 'stars';
SELECT sqrt(avg((wals_predict(user_id, item_id, 'stars') - rating) ^ 2)) < 1.0 AS rmse_below_one
FROM ratings;

-- WALS with an unobserved weight
SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
    model => 'weighted', unobserved_weight => 0.25, factors => 8, iterations => 3);
SELECT feedback, unobserved_weight FROM wals_models WHERE model = 'weighted';

-- early stop: a loose tolerance ends the training before its iterations
SELECT iterations < 50 AS stopped_early FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
    model => 'early', factors => 8, iterations => 50, tolerance => 0.05, solver => 'cholesky');

-- duplicates are merged: summed for implicit, averaged for explicit
CREATE TABLE dup AS SELECT user_id, item_id, rating / 2 AS rating FROM ratings
UNION ALL SELECT user_id, item_id, rating / 2 FROM ratings;
CREATE TABLE dup_explicit AS SELECT user_id, item_id, rating - 1 AS rating FROM ratings
UNION ALL SELECT user_id, item_id, rating + 1 FROM ratings;
SELECT ratings FROM wals_train('dup', 'user_id', 'item_id', 'rating', factors => 8,
    iterations => 3, solver => 'cholesky');
SELECT ratings FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'undup',
    factors => 8, iterations => 3, solver => 'cholesky');
SELECT max(abs(wals_predict(u, i, 'dup') - wals_predict(u, i, 'undup'))) < 1e-5 AS summed
FROM generate_series(1, 300, 7) u, generate_series(1, 60, 5) i;
SELECT ratings FROM wals_train('dup_explicit', 'user_id', 'item_id', 'rating', factors => 8,
    iterations => 3, feedback => 'explicit', solver => 'cholesky');
SELECT max(abs(wals_predict(u, i, 'dup_explicit') - wals_predict(u, i, 'stars2'))) < 1e-5 AS averaged
FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'stars2', factors => 8,
    iterations => 3, feedback => 'explicit', solver => 'cholesky'),
    generate_series(1, 300, 7) u, generate_series(1, 60, 5) i;

-- the model does not depend on the order of the rows
CREATE TABLE shuffled AS SELECT * FROM ratings ORDER BY md5(user_id::text || item_id::text);
SELECT ratings FROM wals_train('shuffled', 'user_id', 'item_id', 'rating', factors => 8,
    iterations => 3, solver => 'cholesky');
SELECT max(abs(wals_predict(u, i, 'shuffled') - wals_predict(u, i, 'undup'))) < 1e-6 AS order_free
FROM generate_series(1, 300, 7) u, generate_series(1, 60, 5) i;

-- every integer id type and numeric rating type; no rating column counts 1
CREATE TABLE typed AS SELECT user_id::smallint AS u2, user_id::int AS u4, user_id::bigint AS u8,
    item_id::smallint AS i2, item_id::bigint AS i8, rating::float8 AS r8,
    rating::int AS r4, rating::numeric AS rn, rating::smallint AS r2, rating::bigint AS r_8,
    1::int AS one FROM ratings;
SELECT model, ratings FROM wals_train('typed', 'u2', 'i2', 'r8', model => 'typed_a',
    factors => 8, iterations => 3, solver => 'cholesky');
SELECT model, ratings FROM wals_train('typed', 'u8', 'i8', 'rn', model => 'typed_b',
    factors => 8, iterations => 3, solver => 'cholesky');
SELECT model, ratings FROM wals_train('typed', 'u4', 'i2', 'r4', model => 'typed_c',
    factors => 8, iterations => 3, solver => 'cholesky');
SELECT model, ratings FROM wals_train('typed', 'u4', 'i8', 'r2', model => 'typed_d',
    factors => 8, iterations => 3, solver => 'cholesky');
SELECT model, ratings FROM wals_train('typed', 'u4', 'i8', 'r_8', model => 'typed_e',
    factors => 8, iterations => 3, solver => 'cholesky');
SELECT max(abs(wals_predict(u, i, 'typed_a') - wals_predict(u, i, 'undup'))) < 1e-6 AS a,
       max(abs(wals_predict(u, i, 'typed_b') - wals_predict(u, i, 'undup'))) < 1e-6 AS b,
       max(abs(wals_predict(u, i, 'typed_c') - wals_predict(u, i, 'undup'))) < 1e-6 AS c,
       max(abs(wals_predict(u, i, 'typed_d') - wals_predict(u, i, 'undup'))) < 1e-6 AS d,
       max(abs(wals_predict(u, i, 'typed_e') - wals_predict(u, i, 'undup'))) < 1e-6 AS e
FROM generate_series(1, 300, 7) u, generate_series(1, 60, 5) i;
SELECT model, ratings FROM wals_train('typed', 'u4', 'i2', NULL, model => 'unrated',
    factors => 8, iterations => 3, solver => 'cholesky');
SELECT model, ratings FROM wals_train('typed', 'u4', 'i2', 'one', model => 'ones',
    factors => 8, iterations => 3, solver => 'cholesky');
SELECT max(abs(wals_predict(u, i, 'unrated') - wals_predict(u, i, 'ones'))) < 1e-6 AS counts_one
FROM generate_series(1, 300, 7) u, generate_series(1, 60, 5) i;

-- views, and the same seed giving the same model
CREATE VIEW recent AS SELECT * FROM ratings WHERE user_id <= 150;
SELECT model, users FROM wals_train('recent', 'user_id', 'item_id', 'rating', factors => 8,
    iterations => 2, seed => 7);
SELECT wals_predict(3, 5, 'recent') AS p \gset
SELECT model FROM wals_train('recent', 'user_id', 'item_id', 'rating', factors => 8,
    iterations => 2, seed => 7);
SELECT wals_predict(3, 5, 'recent') = :'p'::real AS reproducible;

-- a user or item without ratings gets no factors: only rated ones are stored
SELECT count(*) FILTER (WHERE user_id > 150) FROM recent_user_factors;

-- clean up: every model, and with it its tables and log
SELECT count(*) AS dropped FROM (SELECT wals_drop_model(format('%I.%I', schema, model)) FROM wals_models) d;
SELECT count(*) AS models_left FROM wals_models;
SELECT count(*) AS log_left FROM wals_training_log;
SELECT count(*) AS factor_tables_left FROM pg_tables WHERE tablename LIKE '%\_factors';
DROP VIEW recent;
DROP TABLE ratings, dup, dup_explicit, shuffled, typed;
