-- Devices: wals_devices(), the settings of the GPU engine, and how 'auto'
-- and 'gpu' behave where no GPU is usable.  The engine is pointed at a
-- missing file so that the output is the same on machines with a GPU.
SET client_min_messages = warning;
CREATE TABLE plays AS
SELECT u AS user_id, (u * 7 + k) % 50 AS item_id, 1 + k % 3 AS n
FROM generate_series(1, 100) u, generate_series(1, 5) k;

-- the CPU: single-threaded OpenBLAS and the vector kernels of this CPU
SELECT device, usable, blas LIKE 'OpenBLAS%' AS openblas, threads,
       kernels IN ('avx512', 'avx2', 'neon', 'generic') AS known_kernels, reason
FROM wals_devices() WHERE device = 'cpu';

-- wals.kernels forces a family, which wals_devices() shows; every CPU runs
-- generic, none runs all of avx512, avx2 and neon, and a name that is no
-- family is refused
SHOW wals.kernels;
SET wals.kernels = 'generic';
SELECT kernels FROM wals_devices() WHERE device = 'cpu';
SET wals.kernels = 'sse';
\echo :LAST_ERROR_SQLSTATE
DO $$
DECLARE
    refused int := 0;
    family text;
BEGIN
    FOREACH family IN ARRAY ARRAY['avx512', 'avx2', 'neon'] LOOP
        BEGIN
            PERFORM set_config('wals.kernels', family, true);
        EXCEPTION WHEN feature_not_supported THEN
            refused := refused + 1;
        END;
    END LOOP;
    RAISE WARNING 'families this CPU refuses: %', CASE WHEN refused > 0 THEN 'some' ELSE 'none' END;
END
$$;
SHOW wals.kernels;

-- the losses of every family agree with generic's within 1e-5 per
-- iteration, in the leader and in parallel workers, which take the setting
CREATE TABLE kernel_losses (family text, workers int, iteration int, loss float8);
DO $$
DECLARE
    family text;
    w int;
BEGIN
    FOREACH family IN ARRAY ARRAY['generic', 'avx512', 'avx2', 'neon'] LOOP
        BEGIN
            PERFORM set_config('wals.kernels', family, false);
        EXCEPTION WHEN feature_not_supported THEN
            CONTINUE;
        END;
        FOREACH w IN ARRAY ARRAY[0, 2] LOOP
            PERFORM wals_train('plays', 'user_id', 'item_id', 'n', factors => 20,
                               iterations => 4, workers => w, model => 'kernels');
            INSERT INTO kernel_losses
            SELECT family, w, l.iteration, l.loss
            FROM wals_training_log l JOIN wals_models m USING (schema, model, version)
            WHERE m.model = 'kernels';
        END LOOP;
    END LOOP;
    PERFORM set_config('wals.kernels', 'auto', false);
END
$$;
SELECT count(DISTINCT k.family) >= 2 AS families_compared,
       bool_and(abs(k.loss - g.loss) <= 1e-5 * g.loss) AS losses_agree
FROM kernel_losses k JOIN kernel_losses g USING (workers, iteration)
WHERE g.family = 'generic';
-- the workers run the family the leader was set to: a family gives the
-- same losses, to the bit, with and without them, where any other differs
SELECT bool_and(w0.loss = w2.loss) AS workers_follow_the_setting,
       bool_or(w2.loss <> g.loss) AS families_differ
FROM kernel_losses w0
JOIN kernel_losses w2 USING (family, iteration)
JOIN kernel_losses g USING (iteration)
WHERE w0.workers = 0 AND w2.workers = 2 AND g.family = 'generic' AND g.workers = 0;
SELECT wals_drop_model('kernels');
DROP TABLE kernel_losses;
RESET wals.kernels;

SET wals.cuda_library = '/nonexistent/wals_cuda.so';
SELECT device, usable, name, memory_total, reason FROM wals_devices() WHERE device <> 'cpu';

-- auto: small trainings stay on the CPU silently; above wals.gpu_min_ratings
-- a NOTICE says why no GPU is used
SET client_min_messages = notice;
\set VERBOSITY terse
SELECT model, device FROM wals_train('plays', 'user_id', 'item_id', 'n', factors => 4,
    iterations => 1, workers => 0);
SET wals.gpu_min_ratings = 100;
SELECT model, device FROM wals_train('plays', 'user_id', 'item_id', 'n', factors => 4,
    iterations => 1, workers => 0);
\set VERBOSITY default
SET client_min_messages = warning;
SELECT device FROM wals_models WHERE model = 'plays';

-- gpu: an error that says why and how to fix it, before reading anything
SELECT * FROM wals_train('plays', 'user_id', 'item_id', 'n', device => 'gpu');
\echo :LAST_ERROR_SQLSTATE
SET wals.device = 'gpu';
SELECT * FROM wals_train('plays', 'user_id', 'item_id', 'n');
\echo :LAST_ERROR_SQLSTATE
RESET wals.device;
RESET wals.gpu_min_ratings;

-- only a superuser may choose the library the server loads
RESET wals.cuda_library;
CREATE ROLE wals_devices_user;
SET ROLE wals_devices_user;
SET wals.cuda_library = '/tmp/anything.so';
\echo :LAST_ERROR_SQLSTATE
SHOW wals.gpu_min_ratings;
-- while the kernels are any role's choice, for its own session
SET wals.kernels = 'generic';
SELECT kernels FROM wals_devices() WHERE device = 'cpu';
RESET wals.kernels;
RESET ROLE;
DROP ROLE wals_devices_user;

SELECT wals_drop_model('plays');
DROP TABLE plays;
