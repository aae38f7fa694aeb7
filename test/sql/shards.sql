-- The shard side of a sharded training, called by hand: no role may call
-- it until granted it; a role granted it finds nothing works outside a
-- training begun in the transaction, the source read with its privileges,
-- a message that lies about its length refused before anything is
-- allocated for it, and every call from every state of the protocol a
-- result or a clean error.
SET client_min_messages = warning;
CREATE ROLE wals_shard_role;
CREATE TABLE shard_ratings (u int, i int, r real);
INSERT INTO shard_ratings SELECT g % 10 + 1, g % 7 + 1, 1 FROM generate_series(1, 50) g;
CREATE TABLE shard_secret (u int, i int, r real);
GRANT SELECT ON shard_ratings TO wals_shard_role;

-- no role may call the shard functions until granted them; wals_shards is
-- every role's
SELECT count(*) FROM pg_proc p, aclexplode(p.proacl) a
WHERE p.proname LIKE 'wals\_shard\_%' AND a.grantee = 0;
SELECT count(*) FROM pg_proc WHERE proname LIKE 'wals\_shard\_%';
SET ROLE wals_shard_role;
SELECT wals_shard_ids();
SELECT wals_shard_end();
SELECT count(*) FROM wals_shards('shard_ratings');
RESET ROLE;
-- as doc/sharding.md has a DBA make a role a peer of sharded trainings
CREATE ROLE regress_wals_shard_peer NOLOGIN;
GRANT EXECUTE ON FUNCTION wals_shard_load, wals_shard_ids, wals_shard_id_page, wals_shard_plan,
  wals_shard_plan_page, wals_shard_route, wals_shard_outbox, wals_shard_inbox, wals_shard_start,
  wals_shard_put, wals_shard_solve, wals_shard_take, wals_shard_loss, wals_shard_rated,
  wals_shard_end TO regress_wals_shard_peer;
GRANT regress_wals_shard_peer TO wals_shard_role;
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

-- Every call from every state: each state reached by the calls that lead
-- to it, each call tried once from there, in a subtransaction rolled back
-- with the training.  "failed" is a training whose start ran past
-- wals.max_memory once it had begun to build (f = 4096: its solvers'
-- scratch).  Each answer is ok or a clean SQLSTATE, never XX000.
RESET ROLE;
SET wals.max_memory = '10MB';
CREATE FUNCTION pg_temp.shard_call(call text, factors int DEFAULT 4) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  params bytea := '\x00000000000000000000000000000000'::bytea ||
    int8send(factors) || '\x0000000000000003'
    '3fb999999999999a3ff00000000000003ff0000000000000'::bytea ||
    int8send(least(factors, 4)) || '\x00000000000000000000000000000000'
    '0000000000000000'::bytea;
BEGIN
  CASE call
  WHEN 'load' THEN PERFORM wals_shard_load('public.shard_ratings', 'u', 'i', 'r', 'implicit');
  WHEN 'ids' THEN PERFORM wals_shard_ids();
  WHEN 'id_page' THEN PERFORM wals_shard_id_page(0, 0, 100);
  WHEN 'plan' THEN PERFORM wals_shard_plan(params, 0, 2, 10, 7);
  WHEN 'plan_page' THEN PERFORM wals_shard_plan_page(0, int8send(10) ||
    (SELECT string_agg(int8send(g), '' ORDER BY g) FROM generate_series(1, 10) g) ||
    '\x00000000000101010101'::bytea);
  WHEN 'plan_items' THEN PERFORM wals_shard_plan_page(1, int8send(7) ||
    (SELECT string_agg(int8send(g), '' ORDER BY g) FROM generate_series(1, 7) g) ||
    '\x00010001000100'::bytea);
  WHEN 'route' THEN PERFORM wals_shard_route();
  WHEN 'outbox' THEN PERFORM wals_shard_outbox(1, 1000);
  WHEN 'inbox' THEN PERFORM wals_shard_inbox(int8send(1) || int8send(0));
  WHEN 'start' THEN PERFORM wals_shard_start();
  WHEN 'put' THEN PERFORM wals_shard_put(0, 0, 0, decode(repeat('3dcccccd', 20), 'hex'));
  WHEN 'solve' THEN PERFORM wals_shard_solve(0, 'x', decode(repeat('3dcccccd', 16), 'hex'), 100000);
  WHEN 'take' THEN PERFORM wals_shard_take(0, 0, 10);
  WHEN 'loss' THEN PERFORM wals_shard_loss();
  WHEN 'rated' THEN PERFORM wals_shard_rated(0, 1000);
  WHEN 'end' THEN PERFORM wals_shard_end();
  END CASE;
END $$;
CREATE FUNCTION pg_temp.shard_reach(state text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  path text[] := CASE state
    WHEN 'none' THEN '{}'
    WHEN 'loading' THEN '{load}'
    WHEN 'listed' THEN '{load,ids}'
    WHEN 'planned' THEN '{load,ids,plan,plan_page,plan_items}'
    WHEN 'routed' THEN '{load,ids,plan,plan_page,plan_items,route}'
    WHEN 'started' THEN '{load,ids,plan,plan_page,plan_items,route,start}'
    WHEN 'failed' THEN '{load,ids,plan,plan_page,plan_items,route}' END;
  call text;
BEGIN
  FOREACH call IN ARRAY path LOOP
    PERFORM pg_temp.shard_call(call, CASE state WHEN 'failed' THEN 4096 ELSE 4 END);
  END LOOP;
  IF state = 'failed' THEN
    BEGIN
      PERFORM wals_shard_start();
    EXCEPTION WHEN configuration_limit_exceeded THEN
      NULL;
    END;
  END IF;
END $$;
CREATE FUNCTION pg_temp.shard_walk() RETURNS TABLE(state text, call text, answer text)
LANGUAGE plpgsql AS $$
BEGIN
  FOREACH state IN ARRAY '{none,loading,listed,planned,routed,started,failed}'::text[] LOOP
    FOREACH call IN ARRAY '{load,ids,id_page,plan,plan_page,route,outbox,inbox,start,put,solve,take,loss,rated,end}'::text[] LOOP
      BEGIN
        PERFORM pg_temp.shard_reach(state);
        BEGIN
          PERFORM pg_temp.shard_call(call);
          answer := 'ok';
        EXCEPTION WHEN OTHERS THEN
          answer := SQLSTATE;
        END;
        RAISE EXCEPTION USING ERRCODE = 'WALS0';
      EXCEPTION WHEN SQLSTATE 'WALS0' THEN
        RETURN NEXT;
      END;
    END LOOP;
  END LOOP;
END $$;
SET ROLE wals_shard_role;
CREATE TEMP TABLE walk AS SELECT * FROM pg_temp.shard_walk();
SELECT state, string_agg(call || ' ' || answer, ', ' ORDER BY ord) AS answers
FROM walk JOIN unnest('{none,loading,listed,planned,routed,started,failed}'::text[])
  WITH ORDINALITY AS s(state, sord) USING (state)
  JOIN unnest('{load,ids,id_page,plan,plan_page,route,outbox,inbox,start,put,solve,take,loss,rated,end}'::text[])
  WITH ORDINALITY AS c(call, ord) USING (call)
GROUP BY state, sord ORDER BY sord;
SELECT count(*) AS internal_errors FROM walk WHERE answer LIKE 'XX%';
-- nothing of any training is left
SELECT wals_shard_ids();
RESET ROLE;
RESET wals.max_memory;
DROP TABLE walk, shard_ratings, shard_secret;
DROP ROLE wals_shard_role;
DROP OWNED BY regress_wals_shard_peer;
DROP ROLE regress_wals_shard_peer;
