-- Devices: wals_devices(), the settings of the GPU engine, and how 'auto'
-- and 'gpu' behave where no GPU is usable.  The engine is pointed at a
-- missing file so that the output is the same on machines with a GPU.
SET client_min_messages = warning;
CREATE TABLE plays AS
SELECT u AS user_id, (u * 7 + k) % 50 AS item_id, 1 + k % 3 AS n
FROM generate_series(1, 100) u, generate_series(1, 5) k;

-- the CPU: single-threaded OpenBLAS and the vector kernels of this CPU
SELECT device, usable, blas LIKE 'OpenBLAS%' AS openblas, threads,
       kernels IN ('avx512', 'avx2', 'generic') AS known_kernels, reason
FROM wals_devices() WHERE device = 'cpu';

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
RESET ROLE;
DROP ROLE wals_devices_user;

SELECT wals_drop_model('plays');
DROP TABLE plays;
