-- wals.so is not linked to BLAS (src/core/blas.c): a backend that only
-- serves never loads OpenBLAS, whose symbols would take it milliseconds to
-- resolve; one that trains loads it at its first training, through the
-- module wals_blas.  Read from the backend's own mappings.
SET client_min_messages = warning;
CREATE TABLE lib_r AS
SELECT u AS user_id, (u * 7 + g) % 50 + 1 AS item_id
FROM generate_series(1, 200) u, generate_series(1, 5) g;
SELECT count(*) AS trained FROM wals_train('lib_r', 'user_id', 'item_id', model => 'lib_m',
                                           factors => 4, iterations => 2);
\c
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.blas_loaded() RETURNS bool LANGUAGE sql
  AS $$ SELECT pg_read_file('/proc/' || pg_backend_pid() || '/maps') ~ 'libopenblas' $$;
SELECT pg_temp.blas_loaded() AS at_connection;
SELECT count(*) AS recommended FROM wals_recommend(1, 5, 'lib_m');
SELECT count(*) AS recommended FROM wals_recommend_batch('{1,2,3}', 5, 'lib_m');
SELECT count(*) AS similar FROM wals_similar_items(1, 5, 'lib_m');
SELECT pg_temp.blas_loaded() AS after_serving;
SELECT count(*) AS trained FROM wals_train('lib_r', 'user_id', 'item_id', model => 'lib_m2',
                                           factors => 4, iterations => 2);
SELECT pg_temp.blas_loaded() AS after_training;
SELECT blas IS NOT NULL AS blas_named FROM wals_devices() WHERE device = 'cpu';
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('lib_m')) a,
                                (SELECT wals_drop_model('lib_m2')) b;
DROP TABLE lib_r;
