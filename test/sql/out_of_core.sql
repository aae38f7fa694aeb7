-- Training out of core: ratings that do not fit in wals.max_memory are kept
-- in temporary files, and the model is the one a training in memory gives.
SET client_min_messages = warning;
CREATE TEMP TABLE models_before AS SELECT model FROM wals_models;

-- the number of factor rows two models disagree on (0: the same model)
CREATE FUNCTION factors_differ(a text, b text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM ('
                   '(SELECT * FROM %1$I EXCEPT ALL SELECT * FROM %2$I) UNION ALL '
                   '(SELECT * FROM %2$I EXCEPT ALL SELECT * FROM %1$I)) d',
                   a || '_user_factors', b || '_user_factors')
    INTO n;
    EXECUTE format('SELECT %3$s + count(*) FROM ('
                   '(SELECT * FROM %1$I EXCEPT ALL SELECT * FROM %2$I) UNION ALL '
                   '(SELECT * FROM %2$I EXCEPT ALL SELECT * FROM %1$I)) d',
                   a || '_item_factors', b || '_item_factors', n)
    INTO n;
    RETURN n;
END
$$;

-- 1,000,000 rows of 5,000 users and 1,999 items, stars, 100,000 of them
-- repeating a pair (summed: implicit feedback); a few thousand heap pages,
-- which parallel workers read beside the leader
CREATE TABLE stars AS
SELECT g % 5000 + 1 AS user_id, (g % 900000 * 2654435761) % 1999 + 1 AS item_id,
       (1 + g % 5)::real AS rating
FROM generate_series(1::bigint, 1000000) g;
ANALYZE stars;
SELECT count(*) AS rows, count(DISTINCT (user_id, item_id)) AS pairs FROM stars;

-- in memory, as a reference
SELECT users, items, ratings FROM wals_train('stars', 'user_id', 'item_id', 'rating',
    model => 'in_memory', factors => 8, iterations => 3, workers => 0);

-- 6 MB: the rows read outgrow it, go to temporary files, and both
-- matrices are built and swept there; in memory this training needs about
-- 12 MB (the tuning below, which cannot go out of core, is refused)
SET wals.max_memory = '6MB';
SELECT users, items, ratings FROM wals_train('stars', 'user_id', 'item_id', 'rating',
    model => 'spilled', factors => 8, iterations => 3, workers => 0);
SELECT factors_differ('in_memory', 'spilled') AS differ;
SELECT a.loss = b.loss AS same_loss
FROM wals_models a, wals_models b WHERE a.model = 'in_memory' AND b.model = 'spilled';

-- the same with parallel workers: they read beside the leader and map the
-- files of the cells to solve their rows
SELECT users, items, ratings FROM wals_train('stars', 'user_id', 'item_id', 'rating',
    model => 'spilled_workers', factors => 8, iterations => 3, workers => 2);
SELECT factors_differ('in_memory', 'spilled_workers') AS differ;

-- an accelerated training with a validation, out of core and in memory
RESET wals.max_memory;
SELECT count(*) FROM wals_train('stars', 'user_id', 'item_id', 'rating', model => 'ncg_memory', factors => 8,
    iterations => 3, workers => 0, accelerate => 'ncg', validation => 0.1);
SET wals.max_memory = '6MB';
SELECT count(*) FROM wals_train('stars', 'user_id', 'item_id', 'rating', model => 'ncg_spilled', factors => 8,
    iterations => 3, workers => 1, accelerate => 'ncg', validation => 0.1);
SELECT factors_differ('ncg_memory', 'ncg_spilled') AS differ;
SELECT a.validation_score = b.validation_score AND a.best_iteration = b.best_iteration
       AS same_score
FROM wals_models a, wals_models b WHERE a.model = 'ncg_memory' AND b.model = 'ncg_spilled';

-- recommendations served from the model out of core are those of the other
SELECT count(*) AS differ FROM (
    (SELECT * FROM wals_recommend(17, 10, 'in_memory')
     EXCEPT SELECT * FROM wals_recommend(17, 10, 'spilled'))) d;

-- nothing is left in the temporary files' directory
SELECT count(*) AS temporary_files FROM pg_ls_tmpdir();

-- the files count against temp_file_limit, whoever trains
SET wals.max_memory = '6MB';
SET temp_file_limit = '1MB';
SELECT * FROM wals_train('stars', 'user_id', 'item_id', 'rating', model => 'limited',
    factors => 8, iterations => 3, workers => 0);
\echo :LAST_ERROR_SQLSTATE
RESET temp_file_limit;
SELECT count(*) AS temporary_files FROM pg_ls_tmpdir();

-- where even the factors do not fit, the training is refused before it
-- reads anything, from the source's statistics: its rows, and its users
-- and items (5,000 and 1,999 by 512 factors take 14 MB); a tuning keeps its
-- ratings in memory for all of its trials, and is refused at 6 MB (the
-- figures depend on the sample ANALYZE took)
CREATE FUNCTION refusal(q text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'trained';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'about [0-9]+ [kM]B', 'about N');
END
$$;
SET wals.max_memory = '64kB';
SELECT refusal($$SELECT * FROM wals_train('stars', 'user_id', 'item_id', 'rating',
    model => 'refused', factors => 8, iterations => 3)$$);
SET wals.max_memory = '6MB';
SELECT refusal($$SELECT * FROM wals_train('stars', 'user_id', 'item_id', 'rating',
    model => 'refused', factors => 512, iterations => 3)$$);
SELECT refusal($$SELECT * FROM wals_tune('stars', 'user_id', 'item_id', 'rating',
    model => 'tuned', max_trials => 2, space => '{"factors": [8, 16]}')$$);
RESET wals.max_memory;

-- an ordinary role, limited by the superuser, trains out of core and
-- cannot lift either limit
CREATE ROLE wals_ooc_user;
GRANT CREATE ON SCHEMA public TO wals_ooc_user;
GRANT SELECT ON stars TO wals_ooc_user;
SET wals.max_memory = '6MB';
SET temp_file_limit = '64MB';
SET SESSION AUTHORIZATION wals_ooc_user;
SET wals.max_memory = 0;
SET temp_file_limit = -1;
SHOW wals.max_memory;
SELECT users, items, ratings FROM wals_train('stars', 'user_id', 'item_id', 'rating',
    model => 'role_spilled', factors => 8, iterations => 3, workers => 0);
RESET SESSION AUTHORIZATION;
RESET wals.max_memory;
RESET temp_file_limit;
SELECT factors_differ('in_memory', 'role_spilled') AS differ;
SELECT count(*) AS temporary_files FROM pg_ls_tmpdir();

-- leave the database as it was found
SELECT count(wals_drop_model(model)) AS dropped
FROM wals_models WHERE model NOT IN (SELECT model FROM models_before);
REVOKE ALL ON SCHEMA public FROM wals_ooc_user;
DROP TABLE stars;
DROP ROLE wals_ooc_user;
DROP FUNCTION factors_differ(text, text);
DROP FUNCTION refusal(text);
