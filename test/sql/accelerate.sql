-- Fewer and cheaper sweeps: ALS-NCG (accelerate => 'ncg') and the iALS++
-- subspace solver (solver => 'subspace', block_size).  Losses are compared,
-- not printed: their last digits depend on the CPU's kernels.
SET client_min_messages = warning;

CREATE TABLE acc AS
SELECT u AS user_id, (u * 7 + g * 13 + (u * g) % 11) % 300 + 1 AS item_id,
       (1 + (u + g) % 5)::real AS rating
FROM generate_series(1, 1500) u, generate_series(1, 20) g;

-- The loss of each iteration of the current training of a model.
CREATE FUNCTION acc_log(m text) RETURNS TABLE(iteration int, loss float8, step text)
LANGUAGE sql AS $$
  SELECT l.iteration, l.loss, l.step
  FROM wals_training_log l JOIN wals_models USING (schema, model, version)
  WHERE model = m ORDER BY l.iteration
$$;

-- For each feedback variant and both exact and CG sweeps: the accelerated
-- training ends below the plain one after the same number of iterations,
-- never rises (so its model is its best iterate), and marks its steps.
CREATE TABLE acc_runs (variant text, accelerate text, loss float8);
DO $$
DECLARE
  v record;
  a text;
BEGIN
  FOR v IN SELECT * FROM (VALUES
      ('implicit', NULL::real, 'cg'),
      ('implicit', NULL, 'cholesky'),
      ('explicit', NULL, 'cg'),
      ('explicit', 0.05, 'cholesky'),
      ('implicit', 0.3, 'cg')) t(feedback, w0, solver)
  LOOP
    FOREACH a IN ARRAY ARRAY['none', 'ncg'] LOOP
      INSERT INTO acc_runs
      SELECT v.feedback || coalesce(' w0 ' || v.w0, '') || ' ' || v.solver, a, loss
      FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_' || a,
                      factors => 8, iterations => 12, feedback => v.feedback,
                      unobserved_weight => v.w0, solver => v.solver, accelerate => a,
                      workers => 0, replace => true);
      IF a = 'ncg' THEN
        IF EXISTS (SELECT 1 FROM acc_log('acc_ncg') l1 JOIN acc_log('acc_ncg') l2
                   ON l2.iteration = l1.iteration + 1
                   WHERE l2.loss > l1.loss * (1 + 1e-9)) THEN
          RAISE EXCEPTION '%: the loss of the accelerated training rose', v;
        END IF;
        IF (SELECT loss FROM wals_models WHERE model = 'acc_ncg') <>
           (SELECT min(loss) FROM acc_log('acc_ncg')) THEN
          RAISE EXCEPTION '%: the model kept is not the best iterate', v;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM acc_log('acc_ncg') WHERE step = 'ncg') THEN
          RAISE EXCEPTION '%: no iteration moved along the NCG direction', v;
        END IF;
      END IF;
    END LOOP;
  END LOOP;
END $$;
SELECT n.variant, n.loss < p.loss AS ncg_lower
FROM acc_runs n JOIN acc_runs p USING (variant)
WHERE n.accelerate = 'ncg' AND p.accelerate = 'none' ORDER BY 1;
SELECT DISTINCT step FROM wals_training_log WHERE model IN ('acc_none', 'acc_ncg') ORDER BY 1;
SELECT model, accelerate, block_size, solver FROM wals_models
WHERE model IN ('acc_none', 'acc_ncg') ORDER BY 1;

-- NCG reaches the loss of 25 plain CG iterations (within 0.1%) in fewer.
SELECT loss AS plain25 FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_none',
                                        factors => 16, iterations => 25, workers => 0, replace => true) \gset
SELECT FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_ncg',
                       factors => 16, iterations => 25, workers => 0, accelerate => 'ncg', replace => true);
SELECT min(iteration) < 25 AS ncg_reaches_it_sooner
FROM acc_log('acc_ncg') WHERE loss <= :plain25 * 1.001;

-- The same training with parallel workers gives the same losses.
SELECT FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_w2',
                       factors => 16, iterations => 8, workers => 2, accelerate => 'ncg');
SELECT FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_ncg',
                       factors => 16, iterations => 8, workers => 0, accelerate => 'ncg');
SELECT bool_and(a.loss = b.loss AND a.step = b.step) AS same_with_workers
FROM acc_log('acc_w2') a JOIN acc_log('acc_ncg') b USING (iteration);

-- tolerance stops an accelerated training early; warm_start goes on from
-- the stored model, below where it stopped.
SELECT iterations < 200 AS stopped_early, loss AS stopped_at
FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_ncg', factors => 16,
                iterations => 200, tolerance => 1e-3, accelerate => 'ncg') \gset
SELECT :'stopped_early' AS stopped_early;
SELECT loss < :stopped_at AS warm_start_goes_lower
FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_ncg', factors => 16,
                iterations => 3, warm_start => true, accelerate => 'ncg');
SELECT (SELECT loss FROM acc_log('acc_ncg') WHERE iteration = 1) < :stopped_at
       AS first_warm_iteration_lower;

-- A failure inside an accelerated iteration is the error of the plain
-- training, and leaves the model as it was.
SELECT version AS v_before FROM wals_models WHERE model = 'acc_ncg' \gset
CREATE TABLE acc_overflow AS
SELECT user_id, item_id, rating::float8 AS rating FROM acc
UNION ALL SELECT 77, 5, 1e38;
\set VERBOSITY terse
SELECT * FROM wals_train('acc_overflow', 'user_id', 'item_id', 'rating', model => 'acc_ncg',
                         factors => 8, alpha => 1e6, solver => 'cholesky', accelerate => 'ncg', replace => true);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('acc_overflow', 'user_id', 'item_id', 'rating', model => 'acc_ncg',
                         factors => 8, alpha => 1e6, solver => 'cg', accelerate => 'ncg', replace => true);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT version = :v_before AS unchanged FROM wals_models WHERE model = 'acc_ncg';

-- The subspace solver: with one block of all f dimensions it is the exact
-- (Cholesky) solve; with smaller blocks it still lowers the loss every
-- epoch and ends near Cholesky's.
SELECT loss AS chol FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_chol',
                                      factors => 12, iterations => 6, solver => 'cholesky') \gset
SELECT abs(loss - :chol) < 1e-4 * :chol AS full_block_is_cholesky
FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_sub', factors => 12,
                iterations => 6, solver => 'subspace', block_size => 12);
SELECT max(abs(wals_predict(u, i, 'acc_sub') - wals_predict(u, i, 'acc_chol'))) < 1e-3
       AS same_predictions
FROM generate_series(1, 40) u, generate_series(1, 300, 7) i;
SELECT abs(loss - :chol) < 0.02 * :chol AS small_blocks_near_cholesky
FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_sub', factors => 12,
                iterations => 6, solver => 'subspace', block_size => 5);
SELECT bool_and(l2.loss <= l1.loss * (1 + 1e-6)) AS subspace_descends
FROM acc_log('acc_sub') l1 JOIN acc_log('acc_sub') l2 ON l2.iteration = l1.iteration + 1;
SELECT solver, block_size FROM wals_models WHERE model = 'acc_sub';
-- with NCG around it
SELECT loss < :chol AS subspace_ncg_below_cholesky
FROM wals_train('acc', 'user_id', 'item_id', 'rating', model => 'acc_sub', factors => 12,
                iterations => 6, solver => 'subspace', block_size => 4, accelerate => 'ncg');

-- factors up to 4096, within wals.max_memory: the spare vectors and Grams
-- of NCG count in the estimate.
CREATE TABLE acc_tiny AS
SELECT u AS user_id, (u * 3 + g) % 9 + 1 AS item_id, 1 AS rating
FROM generate_series(1, 12) u, generate_series(1, 4) g;
SET wals.max_memory = '300MB';
SELECT factors, iterations FROM wals_train('acc_tiny', 'user_id', 'item_id', 'rating',
                                           model => 'acc_wide', factors => 4096, iterations => 1,
                                           solver => 'subspace', block_size => 256);
\set VERBOSITY sqlstate
SELECT factors FROM wals_train('acc_tiny', 'user_id', 'item_id', 'rating', model => 'acc_wide',
                               factors => 4096, iterations => 1, solver => 'subspace',
                               block_size => 256, accelerate => 'ncg');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
RESET wals.max_memory;
SELECT array_length(factors, 1) FROM acc_wide_item_factors LIMIT 1;

-- An ordinary role trains with both in its own schema, on its own table:
-- the spare vectors, the line's pass in the parallel workers and the
-- subspace scratch need no privilege beyond a plain training's.
CREATE ROLE acc_tenant;
CREATE SCHEMA acc_own AUTHORIZATION acc_tenant;
GRANT SELECT ON acc TO acc_tenant;
SET ROLE acc_tenant;
CREATE TABLE acc_own.r AS SELECT * FROM acc WHERE user_id <= 500;
SELECT iterations FROM wals_train('acc_own.r', 'user_id', 'item_id', 'rating', model => 'acc_own.m',
                                  factors => 8, iterations => 4, solver => 'subspace',
                                  block_size => 3, accelerate => 'ncg', workers => 1);
SELECT schema, model, solver, block_size, accelerate, trained_by FROM wals_models WHERE schema = 'acc_own';
SELECT count(*) FILTER (WHERE step = 'ncg') > 0 AS moved FROM wals_training_log
WHERE schema = 'acc_own' AND model = 'm';
SELECT count(*) AS recommended FROM wals_recommend(1, 5, 'acc_own.m');
-- and with frequency scaling and a validation share, whose split and
-- best iterate live in its own backend's memory
SELECT iterations <= 6 AS trained
FROM wals_train('acc_own.r', 'user_id', 'item_id', 'rating', model => 'acc_own.m', factors => 8,
                iterations => 6, regularization_exponent => 1, unobserved_weight => 0.1,
                validation => 0.2);
SELECT regularization_exponent, best_iteration IS NOT NULL AS validated FROM wals_models
WHERE schema = 'acc_own' AND model = 'm';
SELECT wals_drop_model('acc_own.m') AS dropped_own;
DROP TABLE acc_own.r;
RESET ROLE;
DROP SCHEMA acc_own;
REVOKE SELECT ON acc FROM acc_tenant;
DROP ROLE acc_tenant;

-- Bad arguments, each naming itself.
SELECT * FROM wals_train('acc', 'user_id', 'item_id', accelerate => 'anderson');
SELECT * FROM wals_train('acc', 'user_id', 'item_id', accelerate => NULL);
SELECT * FROM wals_train('acc', 'user_id', 'item_id', solver => 'newton');
SELECT * FROM wals_train('acc', 'user_id', 'item_id', block_size => 8);
SELECT * FROM wals_train('acc', 'user_id', 'item_id', factors => 16, solver => 'subspace',
                         block_size => 0);
SELECT * FROM wals_train('acc', 'user_id', 'item_id', factors => 16, solver => 'subspace',
                         block_size => 17);
SELECT * FROM wals_train('acc', 'user_id', 'item_id', factors => 4097);

SELECT count(*) AS dropped FROM (SELECT wals_drop_model(model) FROM wals_models
                                 WHERE model LIKE 'acc\_%') d;
DROP FUNCTION acc_log(text);
DROP TABLE acc, acc_runs, acc_overflow, acc_tiny;
