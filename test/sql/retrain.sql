-- wals_retrain: a model trained again from its recorded source and
-- settings; and a training onto a model of another source, feedback or
-- width, which replaces it only with replace => true.
CREATE TABLE rt_all AS
SELECT u AS user_id, (u * 7 + g * 13) % 60 + 1 AS item_id, (1 + (u + g) % 5)::real AS stars
FROM generate_series(1, 120) u, generate_series(1, 7) g;
CREATE TABLE rt AS SELECT * FROM rt_all WHERE (user_id + item_id) % 9 <> 0;
CREATE TABLE rt_held AS SELECT user_id, item_id FROM rt_all WHERE (user_id + item_id) % 9 = 0;
CREATE TABLE rt_other AS SELECT * FROM rt WHERE user_id <= 100;

-- every setting but the defaults, then the same training again by hand
SET client_min_messages = warning;
SELECT model, factors FROM wals_train('rt', 'user_id', 'item_id', 'stars', model => 'rt_m',
  factors => 6, iterations => 4, regularization => 0.05, feedback => 'explicit',
  alpha => 2, unobserved_weight => 0.01, solver => 'cholesky', seed => 7, workers => 0,
  tolerance => 0.0001, regularization_exponent => 0.5, init_std => 0.2,
  validation_table => 'rt_held', validation_metric => 'recall@5', patience => 3);
CREATE TABLE rt_first AS
SELECT (SELECT array_agg(factors ORDER BY user_id) FROM rt_m_user_factors) AS x,
       (SELECT row(feedback, factors, max_iterations, regularization, alpha, unobserved_weight,
                   solver, cg_steps, seed, tolerance, regularization_exponent, init_std,
                   validation, validation_table, validation_metric, patience, accelerate,
                   source, user_col, item_col, rating_col)::text
        FROM wals_models WHERE model = 'rt_m') AS settings,
       (SELECT version FROM wals_models WHERE model = 'rt_m') AS version;

-- a cold retraining with the recorded settings makes the same model
SELECT model, factors, iterations <= 4 AS at_most_recorded
FROM wals_retrain('rt_m', workers => 0);
SELECT (SELECT array_agg(factors ORDER BY user_id) FROM rt_m_user_factors) = x AS same_factors,
       (SELECT row(feedback, factors, max_iterations, regularization, alpha, unobserved_weight,
                   solver, cg_steps, seed, tolerance, regularization_exponent, init_std,
                   validation, validation_table, validation_metric, patience, accelerate,
                   source, user_col, item_col, rating_col)::text
        FROM wals_models WHERE model = 'rt_m') = settings AS same_settings,
       (SELECT version FROM wals_models WHERE model = 'rt_m') > version AS new_version
FROM rt_first;

-- warm, and with settings given by name; validation => 0 drops the recorded one
SELECT model, factors FROM wals_retrain('rt_m', warm_start => true, iterations => 2,
                                        regularization => 0.2, validation => 0);
SELECT feedback, factors, max_iterations, regularization, solver, seed, warm_start,
       validation, validation_table, validation_metric, patience
FROM wals_models WHERE model = 'rt_m';
-- another solver drops a block size that belongs to the subspace solver
SELECT model FROM wals_retrain('rt_m', solver => 'subspace', block_size => 2);
SELECT solver, block_size FROM wals_models WHERE model = 'rt_m';
SELECT model FROM wals_retrain('rt_m', solver => 'cg');
SELECT solver, block_size FROM wals_models WHERE model = 'rt_m';

-- a warm start of another width is refused as by wals_train
SELECT model FROM wals_retrain('rt_m', warm_start => true, factors => 8);

-- another width replaces the model, and says so (the DETAILs of the
-- trainings' NOTICEs hold timings: terse)
SET client_min_messages = notice;
\set VERBOSITY terse
SELECT model, factors FROM wals_retrain('rt_m', factors => 8);

-- wals_train onto the model: the same source, feedback and width retrain it
-- quietly; any other refuses, unless replace => true, which says so
SELECT model FROM wals_train('rt', 'user_id', 'item_id', 'stars', model => 'rt_m',
  factors => 8, feedback => 'explicit', iterations => 2);
\set VERBOSITY default
SELECT model FROM wals_train('rt', 'user_id', 'item_id', 'stars', model => 'rt_m',
  factors => 6, feedback => 'explicit', iterations => 2);
SELECT model FROM wals_train('rt', 'user_id', 'item_id', 'stars', model => 'rt_m',
  factors => 8, iterations => 2);
SELECT model FROM wals_train('rt_other', 'user_id', 'item_id', 'stars', model => 'rt_m',
  factors => 8, feedback => 'explicit', iterations => 2);
\set VERBOSITY terse
SELECT model FROM wals_train('rt_other', 'user_id', 'item_id', model => 'rt_m',
  factors => 4, iterations => 2, replace => true);
SELECT source, feedback, factors FROM wals_models WHERE model = 'rt_m';
SELECT model FROM wals_train('rt', 'user_id', 'item_id', model => 'rt_m',
  replace => NULL);

-- a tuned model is retrained with what the tuning chose
\set VERBOSITY default
SET client_min_messages = warning;
SELECT count(*) > 0 AS tuned FROM wals_tune('rt', 'user_id', 'item_id', 'stars',
  model => 'rt_t', max_trials => 2, space => '{"factors": [4, 6]}');
CREATE TABLE rt_tuned AS
SELECT factors, regularization, alpha, unobserved_weight, regularization_exponent, init_std,
       max_iterations FROM wals_models WHERE model = 'rt_t';
SELECT model FROM wals_retrain('rt_t');
SELECT count(*) AS same_tuned_settings FROM rt_tuned t JOIN wals_models m
  ON m.model = 'rt_t' AND (m.factors, m.regularization, m.alpha, m.unobserved_weight,
     m.init_std, m.max_iterations) = (t.factors, t.regularization, t.alpha,
     t.unobserved_weight, t.init_std, t.max_iterations)
  AND m.regularization_exponent IS NOT DISTINCT FROM t.regularization_exponent;

-- errors
SELECT * FROM wals_retrain(NULL);
SELECT * FROM wals_retrain('no_such_model');
SELECT * FROM wals_retrain('rt_m', factors => 0);
SELECT * FROM wals_retrain('rt_m', warm_start => NULL);
SELECT model FROM wals_train('rt', 'user_id', 'item_id', 'stars', model => 'rt_v',
  factors => 4, iterations => 2, validation_table => 'rt_held');
-- the validation table is kept by OID, with its owner: renamed or moved,
-- it is still the relation the model validated on, and is followed
SELECT validation_table, validation_owner = current_user::regrole AS owner_recorded
FROM wals_models WHERE model = 'rt_v';
CREATE SCHEMA rt_elsewhere;
ALTER TABLE rt_held RENAME TO rt_held_moved;
ALTER TABLE rt_held_moved SET SCHEMA rt_elsewhere;
SELECT model FROM wals_retrain('rt_v', iterations => 1);
SELECT validation_table FROM wals_models WHERE model = 'rt_v';
-- given to another role, it is no longer that relation (as after a dump
-- and restore, where a number kept for a relation dropped before the dump
-- may name another role's): refused before it is read
CREATE ROLE wals_rt_other;
ALTER TABLE rt_elsewhere.rt_held_moved OWNER TO wals_rt_other;
SELECT * FROM wals_retrain('rt_v');
ALTER TABLE rt_elsewhere.rt_held_moved OWNER TO CURRENT_USER;
ALTER TABLE rt_elsewhere.rt_held_moved SET SCHEMA public;
ALTER TABLE rt_held_moved RENAME TO rt_held;
DROP SCHEMA rt_elsewhere;
DROP ROLE wals_rt_other;
-- one wals no longer knows, as the update to 0.6.0 leaves a name it could
-- not resolve: the validation metric stays, and a retraining asks for one
UPDATE wals_models SET validation_table = NULL, validation_owner = NULL WHERE model = 'rt_v';
SELECT * FROM wals_retrain('rt_v');
SELECT model FROM wals_retrain('rt_v', validation_table => 'rt_held');
SELECT validation_table, validation_metric FROM wals_models WHERE model = 'rt_v';
DROP TABLE rt_held;
SELECT * FROM wals_retrain('rt_v');
SELECT model FROM wals_retrain('rt_v', validation => 0);
-- a metric alone, for a model that no longer validates, is refused as by wals_train
SELECT * FROM wals_retrain('rt_v', validation_metric => 'auc');
DROP TABLE rt_other;
SELECT * FROM wals_retrain('rt_m');

SELECT wals_drop_model('rt_m'), wals_drop_model('rt_t'), wals_drop_model('rt_v');
DROP TABLE rt_all, rt, rt_first, rt_tuned;
RESET client_min_messages;
