-- The shard side of a sharded training, called by hand by an ordinary
-- role: nothing works outside a training begun in the transaction, the
-- source is read with the caller's privileges, and a message that lies
-- about its length is refused before anything is allocated for it.
SET client_min_messages = warning;
CREATE ROLE wals_shard_role;
CREATE TABLE shard_ratings (u int, i int, r real);
INSERT INTO shard_ratings SELECT g % 10 + 1, g % 7 + 1, 1 FROM generate_series(1, 50) g;
CREATE TABLE shard_secret (u int, i int, r real);
GRANT SELECT ON shard_ratings TO wals_shard_role;
SET ROLE wals_shard_role;

-- wals_shards: no shards for a local table
SELECT count(*) FROM wals_shards('shard_ratings');
SELECT * FROM wals_shards(NULL);

-- outside of a training
SELECT wals_shard_ids();
SELECT wals_shard_solve(0, 'x', '', 0);
SELECT wals_shard_end();

-- the caller's privileges
BEGIN;
SELECT wals_shard_load('public.shard_secret', 'u', 'i', NULL, 'implicit');
ROLLBACK;

-- a load, then messages that lie
BEGIN;
SELECT wals_shard_load('public.shard_ratings', 'u', 'i', 'r', 'implicit');
SELECT length(wals_shard_ids());
SELECT wals_shard_plan('\x00'::bytea, 0, 1, 10, 7);
ROLLBACK;
BEGIN;
SELECT wals_shard_load('public.shard_ratings', 'u', 'i', NULL, 'implicit');
SELECT length(wals_shard_ids());
-- parameters in range, f = 4 (feedback, solver, factors, CG steps,
-- regularization, alpha, w0, block size, scaled, exponent, workers), then
-- plan pages that lie
SELECT
  '\x0000000000000000'
  '0000000000000000'
  '0000000000000004'
  '0000000000000003'
  '3fb999999999999a'
  '3ff0000000000000'
  '3ff0000000000000'
  '0000000000000004'
  '0000000000000000'
  '0000000000000000'
  '0000000000000000'::bytea AS params \gset
SELECT wals_shard_plan(:'params', 0, 1, 10, 7);
SAVEPOINT s;
SELECT wals_shard_plan_page(0, '\x0000000040000000'::bytea);
ROLLBACK TO s;
SELECT wals_shard_plan_page(0, '\x00000000000000050000000000000001'::bytea);
ROLLBACK TO s;
SELECT wals_shard_route();
ROLLBACK;
BEGIN;
SELECT wals_shard_load('public.shard_ratings', 'u', 'i', NULL, 'implicit');
SELECT length(wals_shard_ids());
-- a shard out of range, and more users than ids can be
SELECT wals_shard_plan('\x'::bytea, 3, 2, 10, 7);
ROLLBACK;
BEGIN;
SELECT wals_shard_load('public.shard_ratings', 'u', 'i', NULL, 'implicit');
SELECT length(wals_shard_ids());
SELECT wals_shard_plan('\x'::bytea, 0, 1, 5000000000, 7);
ROLLBACK;

-- a training planned for two shards, this one shard 0: a half-sweep needs
-- every row the other shard owns of the other side, which come whole and
-- in order; the rows this shard solves are its own
BEGIN;
SELECT wals_shard_load('public.shard_ratings', 'u', 'i', 'r', 'implicit');
SELECT length(wals_shard_ids());
SELECT wals_shard_plan(:'params', 0, 2, 10, 7);
SELECT wals_shard_plan_page(0, int8send(10) ||
  (SELECT string_agg(int8send(g), '' ORDER BY g) FROM generate_series(1, 10) g) ||
  '\x00000000000101010101'::bytea);
SELECT wals_shard_plan_page(1, int8send(7) ||
  (SELECT string_agg(int8send(g), '' ORDER BY g) FROM generate_series(1, 7) g) ||
  '\x00010001000100'::bytea);
SELECT wals_shard_route();
SELECT wals_shard_start();
CREATE TEMP TABLE f AS
  SELECT n, coalesce((SELECT string_agg(float4send(0.1::real), '') FROM generate_series(1, 4 * n)), '')
         AS rows
  FROM generate_series(0, 5) n;
SELECT wals_shard_put(0, 0, 0, rows) FROM f WHERE n = 5;
SELECT wals_shard_put(1, 0, 0, rows) FROM f WHERE n = 4;
SAVEPOINT s;
SELECT length(wals_shard_solve(0, 'x', (SELECT rows FROM f WHERE n = 4), 100000));
ROLLBACK TO s;
SELECT wals_shard_put(2, 0, 0, rows) FROM f WHERE n = 0;
ROLLBACK TO s;
SELECT wals_shard_put(1, 2, 0, rows) FROM f WHERE n = 0;
ROLLBACK TO s;
SELECT wals_shard_put(1, 1, 1, rows) FROM f WHERE n = 1;
ROLLBACK TO s;
SELECT wals_shard_put(1, 1, 0, rows) FROM f WHERE n = 4;
ROLLBACK TO s;
SELECT wals_shard_put(1, 1, 0, rows) FROM f WHERE n = 2;
SELECT length(wals_shard_solve(0, 'x', (SELECT rows FROM f WHERE n = 4), 100000));
ROLLBACK TO s;
SELECT wals_shard_put(1, 1, 0, rows) FROM f WHERE n = 2;
SELECT wals_shard_put(1, 1, 2, rows) FROM f WHERE n = 1;
SELECT length(wals_shard_solve(0, 'x', (SELECT rows FROM f WHERE n = 4), 100000));
SELECT wals_shard_solve(1, 'x', (SELECT rows FROM f WHERE n = 4), 100000);
ROLLBACK TO s;
SELECT wals_shard_put(1, 1, 0, rows) FROM f WHERE n = 3;
SELECT length(wals_shard_solve(0, 'x', (SELECT rows FROM f WHERE n = 4), 100000));
SELECT wals_shard_loss() > 0;
SELECT wals_shard_put(0, 1, 0, rows) FROM f WHERE n = 5;
SELECT wals_shard_loss();
ROLLBACK;

-- the state ends with the transaction
SELECT wals_shard_ids();
RESET ROLE;
DROP TABLE shard_ratings, shard_secret;
DROP ROLE wals_shard_role;
