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
SELECT wals_shard_solve(0, 'x', '', '', 0);
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
-- parameters in range, then plan pages that lie
SELECT wals_shard_plan(
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
  '0000000000000000'::bytea,
  0, 1, 10, 7);
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

-- the state ends with the transaction
SELECT wals_shard_ids();
RESET ROLE;
DROP TABLE shard_ratings, shard_secret;
DROP ROLE wals_shard_role;
