-- wals_tune: a seeded random search, each trial a training scored on a
-- held-out share, then the model trained with the best parameters.
-- Scores are compared, not printed: their last digits depend on the CPU.
SET client_min_messages = warning;

CREATE TABLE tun AS
SELECT u AS user_id, (u * 7 + g * 13 + (u * g) % 11) % 200 + 1 AS item_id,
       (1 + (u + g) % 5)::real AS rating
FROM generate_series(1, 400) u, generate_series(1, 10) g;

CREATE TABLE tun_a AS
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_m', max_trials => 3,
                        space => '{"factors": [8, 12], "init_std": [0.1, 0.2]}');
SELECT trial, parameters ? 'regularization' AND parameters ? 'unobserved_weight' AS sampled,
       (parameters->>'factors')::int IN (8, 12) AS factors_from_space,
       score >= 0 AS scored, iterations BETWEEN 1 AND 50 AS stopped
FROM tun_a ORDER BY trial;
-- the model is trained on every rating with the best trial's parameters,
-- for its best number of iterations, and no trial model is stored
SELECT m.factors = (b.parameters->>'factors')::int AS best_factors,
       m.iterations = b.iterations AS best_iterations,
       abs(m.unobserved_weight - (b.parameters->>'unobserved_weight')::real) < 1e-6 AS best_w0,
       m.validation IS NULL AS on_every_rating,
       m.ratings = (SELECT count(DISTINCT (user_id, item_id)) FROM tun) AS every_rating
FROM wals_models m,
     (SELECT * FROM tun_a ORDER BY score DESC, trial LIMIT 1) b
WHERE m.model = 'tun_m';
-- the trial it was trained with is the one marked chosen, in the result and
-- the log
SELECT count(*) FILTER (WHERE chosen) AS chosen,
       bool_and(chosen = (trial = (SELECT trial FROM tun_a ORDER BY score DESC, trial LIMIT 1)))
         AS the_best
FROM tun_a;
SELECT count(*) AS chosen_logged
FROM wals_tuning_log l JOIN tun_a a USING (trial)
WHERE l.model = 'tun_m' AND l.chosen AND a.chosen;
SELECT count(*) AS trial_models FROM wals_models WHERE model = 'tun_m_trial';
SELECT count(*) AS logged, count(DISTINCT tuning) AS tunings, min(metric) AS metric,
       bool_and(seconds > 0) AS timed
FROM wals_tuning_log WHERE model = 'tun_m';
SELECT count(*) AS logged_as_returned
FROM wals_tuning_log l JOIN tun_a a USING (trial)
WHERE l.model = 'tun_m' AND l.parameters = a.parameters AND l.value = a.score
  AND l.iterations = a.iterations AND l.seconds = a.seconds;
SELECT count(*) AS recommended FROM wals_recommend(1, 5, 'tun_m');

-- the source is read once, by the first trial: the trials after it and the
-- final training train on what it read, and no trial stores a model
CREATE SEQUENCE tun_reads;
CREATE FUNCTION tun_count(id int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM public.wals_models WHERE model OPERATOR(pg_catalog.=) 'tun_g_trial') THEN
    RAISE EXCEPTION 'a trial was stored';
  END IF;
  PERFORM pg_catalog.nextval('public.tun_reads');
  RETURN id;
END $$;
CREATE VIEW tun_look AS SELECT public.tun_count(user_id) AS user_id, item_id, rating FROM tun;
SELECT count(*) AS trials
FROM wals_tune('tun_look', 'user_id', 'item_id', 'rating', model => 'tun_g', max_trials => 2,
               space => '{"factors": [8]}');
SELECT last_value = (SELECT count(*) FROM tun) AS read_once FROM tun_reads;
SELECT count(*) AS trial_models FROM wals_models WHERE model = 'tun_g_trial';
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tun_g')) d;
DROP VIEW tun_look;
DROP FUNCTION tun_count(int);
DROP SEQUENCE tun_reads;

-- quiet: the caller hears one NOTICE per trial, the trainings' own (what
-- they read, each iteration) going to the server's log; a training alone
-- still says both.  Shown by SQLSTATE, since the scores' last digits vary.
SET client_min_messages = notice;
SET max_parallel_maintenance_workers = 0;
\set VERBOSITY sqlstate
SELECT count(*) AS trials
FROM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_q', max_trials => 3,
               space => '{"factors": [8]}');
SELECT iterations FROM wals_train('tun', 'user_id', 'item_id', 'rating', model => 'tun_q2',
                                  factors => 8, iterations => 2);
-- a tuning whose second trial fails, caught: it leaves no model, and a
-- training after it in the same transaction speaks again and stores its
-- model.  The narrowest train first: the trials of 8 factors say their
-- NOTICEs, then the first of 2048 fails on the memory limit; then the
-- training's three NOTICEs.  The budget leaves room for the trials of 2048
-- factors, whose cost it scales by the square of the widths (see
-- tune_concurrently.sql).
CREATE TEMP TABLE tun_caught (state text, trial_models bigint);
SET wals.max_memory = '4MB';
DO $$
BEGIN
  BEGIN
    PERFORM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_f',
                      max_trials => 9, space => '{"factors": [8, 2048]}',
                      budget => '1000 hours');
  EXCEPTION WHEN configuration_limit_exceeded THEN
    INSERT INTO tun_caught
    SELECT SQLSTATE, (SELECT count(*) FROM wals_models WHERE model LIKE 'tun_f%');
  END;
  PERFORM wals_train('tun', 'user_id', 'item_id', 'rating', model => 'tun_f2', factors => 8,
                     iterations => 2);
END $$;
RESET wals.max_memory;
\set VERBOSITY default
SET client_min_messages = warning;
RESET max_parallel_maintenance_workers;
SELECT * FROM tun_caught;
SELECT model FROM wals_models WHERE model LIKE 'tun_f%' OR model LIKE 'tun_q%' ORDER BY model;
SELECT count(*) AS logged FROM wals_tuning_log WHERE model = 'tun_f';
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tun_q')) a,
                                (SELECT wals_drop_model('tun_q2')) b,
                                (SELECT wals_drop_model('tun_f2')) c;
DROP TABLE tun_caught;

-- the same seed, the same trials and scores
SELECT count(*) AS differing
FROM tun_a a FULL JOIN wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_m',
                                 max_trials => 3,
                                 space => '{"factors": [8, 12], "init_std": [0.1, 0.2]}') b
  USING (trial)
WHERE a.parameters IS DISTINCT FROM b.parameters OR a.score IS DISTINCT FROM b.score;
SELECT count(DISTINCT tuning) AS tunings FROM wals_tuning_log WHERE model = 'tun_m';
-- another seed, other parameters; a budget ends the search after a trial
SELECT count(*) AS trials, bool_or(b.parameters IS DISTINCT FROM a.parameters) AS other_parameters
FROM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_m', seed => 7,
               budget => '1 millisecond', space => '{"factors": [8]}') b
JOIN tun_a a USING (trial);

-- Successive halving: nine configurations for 3 iterations, narrowest
-- first; the best three (by score, then as sampled) for 9; the best of
-- those for up to 50.
CREATE TABLE tun_h AS
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_h', max_trials => 13,
                        space => '{"factors": [4, 8]}');
SELECT trial, parameters->'max_iterations' AS max_iterations,
       iterations <= (parameters->>'max_iterations')::int AS within,
       parameters->>'solver' AS solver, parameters->>'accelerate' AS accelerate
FROM tun_h ORDER BY trial;
WITH r AS (
  SELECT trial, (parameters->>'configuration')::int AS config,
         (parameters->>'max_iterations')::int AS cap, (parameters->>'factors')::int AS f, score,
         lag((parameters->>'factors')::int) OVER (PARTITION BY parameters->>'max_iterations'
                                                  ORDER BY trial) AS prev_f
  FROM tun_h)
SELECT (SELECT array_agg(config ORDER BY config) FROM r WHERE cap = 3) AS first_round,
       bool_and(f >= prev_f) FILTER (WHERE prev_f IS NOT NULL) AS narrowest_first,
       (SELECT array_agg(config ORDER BY config) FROM r WHERE cap = 9) =
       (SELECT array_agg(config ORDER BY config)
        FROM (SELECT config FROM r WHERE cap = 3 ORDER BY score DESC, config LIMIT 3) b)
         AS best_three_go_on,
       (SELECT config FROM r WHERE cap = 50) =
       (SELECT config FROM r WHERE cap = 9 ORDER BY score DESC, config LIMIT 1) AS best_goes_on,
       (SELECT parameters - 'max_iterations' FROM tun_h WHERE trial = 13) =
       (SELECT parameters - 'max_iterations' FROM tun_h
        WHERE (parameters->>'max_iterations')::int = 3
          AND parameters->'configuration' = (SELECT parameters->'configuration' FROM tun_h
                                             WHERE trial = 13)) AS same_parameters
FROM r;
-- from 512 factors on, the subspace solver with ALS-NCG trains a trial
SELECT parameters->>'solver' AS solver, parameters->>'accelerate' AS accelerate
FROM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_h', max_trials => 1,
               space => '{"factors": [512]}');
SELECT solver, accelerate, factors FROM wals_models WHERE model = 'tun_h';
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tun_h')) d;
DROP TABLE tun_h;

-- a range and a choice of the frequency-scaled exponent
SELECT bool_and((parameters->>'regularization')::float8 BETWEEN 0.001 AND 0.01) AS in_range,
       bool_and(parameters->'regularization_exponent' = '1') AS scaled
FROM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_m', max_trials => 2,
               space => '{"factors": [8], "regularization": {"min": 0.001, "max": 0.01},
                          "regularization_exponent": [1]}');

-- another metric: the trials stop on it, and it is logged
SELECT count(*) AS trials, bool_and(score BETWEEN 0 AND 1) AS recall
FROM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_r', max_trials => 2,
               metric => 'recall@10', space => '{"factors": [8]}');
SELECT validation IS NULL AS final_on_every_rating FROM wals_models WHERE model = 'tun_r';
SELECT DISTINCT metric FROM wals_tuning_log WHERE model = 'tun_r';

-- explicit ratings: judged by the RMSE of the held-out ratings unless told
-- otherwise, the chosen trial the lowest, in a space of the observed
-- ratings alone (no unobserved weight) and narrower models
CREATE TABLE tun_e AS
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_e', max_trials => 4,
                        feedback => 'explicit');
SELECT count(*) AS trials, bool_and(score > 0 AND score < 5) AS rmse,
       bool_and((parameters->>'unobserved_weight')::float8 = 0) AS observed_only,
       bool_and((parameters->>'factors')::int IN (8, 16, 32, 64, 128)) AS narrow
FROM tun_e;
SELECT (SELECT trial FROM tun_e WHERE chosen) =
       (SELECT trial FROM tun_e ORDER BY score, trial LIMIT 1) AS lowest_chosen;
SELECT feedback, validation IS NULL AS final_on_every_rating FROM wals_models WHERE model = 'tun_e';
SELECT DISTINCT metric FROM wals_tuning_log WHERE model = 'tun_e';
SELECT count(*) AS trials, bool_and(score BETWEEN 0 AND 1) AS ndcg
FROM wals_tune('tun', 'user_id', 'item_id', 'rating', model => 'tun_e', max_trials => 2,
               feedback => 'explicit', metric => 'ndcg@10', space => '{"factors": [8]}');
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tun_e')) d;

-- a model with the trial model's name is never replaced: wals_tune refuses
SELECT 1 FROM wals_train('tun', 'user_id', 'item_id', model => 'tun_r_trial', factors => 8,
                         iterations => 1);
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', model => 'tun_r', max_trials => 1);
SELECT count(*) AS kept FROM wals_models WHERE model = 'tun_r_trial';
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tun_r_trial')) d,
                                (SELECT wals_drop_model('tun_r')) r;

-- Bad arguments, each naming itself.
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', metric => 'rmse');
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', feedback => 'stars');
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', feedback => 'explicit');
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', validation => 0);
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', budget => '-1 minute');
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', max_trials => 0);
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', space => '{"depth": [3]}');
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', space => '{"factors": {"min": 8, "max": 16}}');
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', space => '{"alpha": [-1]}');
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', space => '{"alpha": []}');

-- an ordinary role tunes in its own schema, and may not tune into another's
CREATE ROLE tun_tenant;
CREATE SCHEMA tun_own AUTHORIZATION tun_tenant;
GRANT SELECT ON tun TO tun_tenant;
SET ROLE tun_tenant;
SELECT count(*) AS trials FROM wals_tune('tun', 'user_id', 'item_id', 'rating',
                                         model => 'tun_own.m', max_trials => 1,
                                         space => '{"factors": [8]}');
SELECT schema, model, trained_by FROM wals_models WHERE schema = 'tun_own';
SELECT count(*) AS logged FROM wals_tuning_log WHERE schema = 'tun_own';
\set VERBOSITY sqlstate
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', model => 'public.tun_m', max_trials => 1);
\set VERBOSITY default
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tun_own.m')) d;
RESET ROLE;
-- a tuning trains as wals_train does: without EXECUTE on it, it may not
REVOKE EXECUTE ON FUNCTION wals_train FROM PUBLIC;
SET ROLE tun_tenant;
\set VERBOSITY sqlstate
SELECT * FROM wals_tune('tun', 'user_id', 'item_id', model => 'tun_own.m', max_trials => 1);
\set VERBOSITY default
RESET ROLE;
GRANT EXECUTE ON FUNCTION wals_train TO PUBLIC;
DROP SCHEMA tun_own;
REVOKE SELECT ON tun FROM tun_tenant;
DROP ROLE tun_tenant;

-- a tuning's trainings take wals_train's defaults for what they do not set
SELECT count(*) AS plain FROM wals_train('tun', 'user_id', 'item_id', 'rating', model => 'tun_plain',
                                         factors => 8, iterations => 1);
SELECT t.feedback = p.feedback AND t.cg_steps = p.cg_steps AND t.warm_start = p.warm_start
       AND t.tolerance IS NOT DISTINCT FROM p.tolerance AND t.device = p.device AS same_defaults
FROM wals_models t, wals_models p WHERE t.model = 'tun_m' AND p.model = 'tun_plain';
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tun_plain')) d;

-- dropping the model drops its tuning log
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tun_m')) d;
SELECT count(*) AS logged FROM wals_tuning_log WHERE model = 'tun_m';
DROP TABLE tun, tun_a;
