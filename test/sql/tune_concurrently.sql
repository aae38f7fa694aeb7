-- wals_tune_concurrently: wals_tune's search, committing after each trial.
-- Scores are compared, not printed: their last digits depend on the CPU.
SET client_min_messages = warning;

CREATE TABLE tuc AS
SELECT u AS user_id, (u * 7 + g * 13 + (u * g) % 11) % 200 + 1 AS item_id,
       (1 + (u + g) % 5)::real AS rating
FROM generate_series(1, 400) u, generate_series(1, 10) g;

-- the same search as wals_tune's: the same trials, scores and choice
CREATE TABLE tuc_f AS
SELECT * FROM wals_tune('tuc', 'user_id', 'item_id', 'rating', model => 'tuc_f', max_trials => 3,
                        space => '{"factors": [8, 12], "init_std": [0.1, 0.2]}');
CALL wals_tune_concurrently('tuc', 'user_id', 'item_id', 'rating', model => 'tuc_p',
                            max_trials => 3,
                            space => '{"factors": [8, 12], "init_std": [0.1, 0.2]}') \gset tuc_
SELECT count(*) AS differing
FROM tuc_f f FULL JOIN (SELECT trial, parameters, value, chosen FROM wals_tuning_log
                        WHERE tuning = :tuc_tuning) p USING (trial)
WHERE f.parameters IS DISTINCT FROM p.parameters OR f.score IS DISTINCT FROM p.value
   OR f.chosen IS DISTINCT FROM p.chosen;
SELECT :tuc_chosen_trial = (SELECT trial FROM tuc_f WHERE chosen) AS same_choice,
       :tuc_score = (SELECT value FROM wals_tuning_log WHERE tuning = :tuc_tuning AND chosen)
         AS its_score,
       (SELECT model FROM wals_tuning_log WHERE tuning = :tuc_tuning LIMIT 1) AS logged_as;
-- the model is trained on every rating with the chosen trial's parameters
SELECT m.factors = (l.parameters->>'factors')::int AS chosen_factors,
       m.iterations = l.iterations AS chosen_iterations,
       m.ratings = (SELECT count(DISTINCT (user_id, item_id)) FROM tuc) AS every_rating
FROM wals_models m, wals_tuning_log l
WHERE m.model = 'tuc_p' AND l.tuning = :tuc_tuning AND l.chosen;
SELECT count(*) AS trial_models FROM wals_models WHERE model LIKE 'tuc%trial';

-- Each trial committed in a transaction of its own; the chosen mark (an
-- update of its trial's row) in the one that stored the model.  wals_tune
-- runs in one.
SELECT count(DISTINCT l.xmin::text) AS transactions,
       bool_and(l.xmin::text = m.xmin::text) FILTER (WHERE l.chosen) AS chosen_with_the_model,
       bool_and(l.xmin::text <> m.xmin::text) FILTER (WHERE NOT l.chosen) AS trials_before
FROM wals_tuning_log l, wals_models m
WHERE l.tuning = :tuc_tuning AND m.model = 'tuc_p';
SELECT count(DISTINCT xmin::text) AS transactions FROM wals_tuning_log WHERE model = 'tuc_f';

-- the source is read once, by the first trial: the trials after it and the
-- final training train on what it read
CREATE SEQUENCE tuc_reads;
CREATE FUNCTION tuc_count(id int) RETURNS int LANGUAGE sql
  AS 'SELECT $1 + 0 * pg_catalog.nextval(''public.tuc_reads'')';
CREATE VIEW tuc_counted AS SELECT public.tuc_count(user_id) AS user_id, item_id, rating FROM tuc;
CALL wals_tune_concurrently('tuc_counted', 'user_id', 'item_id', 'rating', model => 'tuc_c',
                            max_trials => 3, space => '{"factors": [8]}') \gset tuc_c_
SELECT last_value = (SELECT count(*) FROM tuc) AS read_once FROM tuc_reads;
SELECT setval('tuc_reads', 1, false) IS NOT NULL AS reset;
SELECT count(*) AS trials
FROM wals_tune('tuc_counted', 'user_id', 'item_id', 'rating', model => 'tuc_c', max_trials => 3,
               space => '{"factors": [8]}');
SELECT last_value = (SELECT count(*) FROM tuc) AS read_once FROM tuc_reads;
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tuc_c')) d;
DROP VIEW tuc_counted;
DROP FUNCTION tuc_count(int);
DROP SEQUENCE tuc_reads;

-- Only where CALL is a statement of its own: not in a transaction block,
-- nor from a function.
\set VERBOSITY sqlstate
BEGIN;
CALL wals_tune_concurrently('tuc', 'user_id', 'item_id', model => 'tuc_x', max_trials => 1);
ROLLBACK;
CREATE FUNCTION tuc_from_function() RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  t bigint;
  c int;
  v float8;
BEGIN
  CALL public.wals_tune_concurrently('public.tuc', 'user_id', 'item_id', model => 'tuc_x',
                                     max_trials => 1, tuning => t, chosen_trial => c,
                                     score => v);
  RETURN 1;
END $$;
SELECT tuc_from_function();
DROP FUNCTION tuc_from_function();
-- nor from code that wals runs, where it could not commit either
CREATE FUNCTION tuc_inside(id int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  t bigint;
  c int;
  v float8;
BEGIN
  IF id = 1 THEN
    CALL public.wals_tune_concurrently('public.tuc', 'user_id', 'item_id', model => 'tuc_x',
                                       max_trials => 1, tuning => t, chosen_trial => c,
                                       score => v);
  END IF;
  RETURN id;
END $$;
CREATE VIEW tuc_hook AS SELECT public.tuc_inside(user_id) AS user_id, item_id FROM tuc;
SELECT * FROM wals_train('tuc_hook', 'user_id', 'item_id', model => 'tuc_x', factors => 4,
                         iterations => 1);
DROP VIEW tuc_hook;
DROP FUNCTION tuc_inside(int);
\set VERBOSITY default
-- a DO block at the top level may call it, as a procedure called so may
DO $$
DECLARE
  t bigint;
  c int;
  v float8;
BEGIN
  CALL wals_tune_concurrently('tuc', 'user_id', 'item_id', model => 'tuc_do', max_trials => 2,
                              space => '{"factors": [8]}', tuning => t, chosen_trial => c,
                              score => v);
  RAISE WARNING 'tuned: %, a trial chosen: %, trials logged: %', t IS NOT NULL,
    c BETWEEN 1 AND 2, (SELECT count(*) FROM wals_tuning_log WHERE tuning = t);
END $$;
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tuc_do')) d;
\set VERBOSITY sqlstate
-- bad arguments, as wals_tune's
CALL wals_tune_concurrently('tuc', 'user_id', 'item_id', max_trials => 0);
CALL wals_tune_concurrently('tuc', 'user_id', 'item_id', metric => 'rmse');
\set VERBOSITY default
SELECT count(*) AS models FROM wals_models WHERE model = 'tuc_x';

-- A trial that fails after others committed: their rows stay in the log,
-- none chosen, and no model is stored.  The narrowest train first, so the
-- widest fail on the memory limit once those of 8 factors are done.  The
-- budget must leave room for the widest, which it scales by the square of
-- the widths: (2048 / 8)^2 times an 8-factor trial of 10 ms is past the
-- default 10 minutes, and a slow moment would skip them.
SET wals.max_memory = '4MB';
\set VERBOSITY sqlstate
CALL wals_tune_concurrently('tuc', 'user_id', 'item_id', 'rating', model => 'tuc_fail',
                            max_trials => 9, space => '{"factors": [8, 2048]}',
                            budget => '1000 hours');
\set VERBOSITY default
RESET wals.max_memory;
SELECT count(*) > 0 AS kept, bool_and((parameters->>'factors')::int = 8) AS the_narrow_ones,
       count(*) FILTER (WHERE chosen) AS chosen
FROM wals_tuning_log WHERE model = 'tuc_fail';
SELECT count(*) AS models FROM wals_models WHERE model LIKE 'tuc_fail%';

-- an ordinary role tunes in its own schema, with its own privileges: not
-- into another's schema, nor from a table it may not read, nor without
-- EXECUTE on wals_train
CREATE ROLE tuc_tenant;
CREATE SCHEMA tuc_own AUTHORIZATION tuc_tenant;
GRANT SELECT ON tuc TO tuc_tenant;
SET ROLE tuc_tenant;
CALL wals_tune_concurrently('public.tuc', 'user_id', 'item_id', 'rating', model => 'tuc_own.m',
                            max_trials => 2, space => '{"factors": [8]}') \gset tuc_own_
SELECT schema, model, trained_by FROM wals_models WHERE schema = 'tuc_own';
SELECT count(*) AS logged, count(*) FILTER (WHERE chosen) AS chosen
FROM wals_tuning_log WHERE schema = 'tuc_own';
\set VERBOSITY sqlstate
CALL wals_tune_concurrently('public.tuc', 'user_id', 'item_id', model => 'public.tuc_p',
                            max_trials => 1);
\set VERBOSITY default
RESET ROLE;
REVOKE SELECT ON tuc FROM tuc_tenant;
SET ROLE tuc_tenant;
\set VERBOSITY sqlstate
CALL wals_tune_concurrently('public.tuc', 'user_id', 'item_id', model => 'tuc_own.m',
                            max_trials => 1);
\set VERBOSITY default
RESET ROLE;
GRANT SELECT ON tuc TO tuc_tenant;
REVOKE EXECUTE ON FUNCTION wals_train FROM PUBLIC;
SET ROLE tuc_tenant;
\set VERBOSITY sqlstate
CALL wals_tune_concurrently('public.tuc', 'user_id', 'item_id', model => 'tuc_own.m',
                            max_trials => 1);
\set VERBOSITY default
RESET ROLE;
GRANT EXECUTE ON FUNCTION wals_train TO PUBLIC;
SET ROLE tuc_tenant;
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tuc_own.m')) d;
RESET ROLE;
DROP SCHEMA tuc_own;
REVOKE SELECT ON tuc FROM tuc_tenant;
DROP ROLE tuc_tenant;

SELECT count(*) AS dropped FROM (SELECT wals_drop_model('tuc_f')) f,
                                (SELECT wals_drop_model('tuc_p')) p;
DELETE FROM wals_tuning_log WHERE model = 'tuc_fail';
DROP TABLE tuc, tuc_f;
