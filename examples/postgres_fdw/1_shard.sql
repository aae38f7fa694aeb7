-- Sharded training over postgres_fdw, step 1 of 4: on each of the two shard
-- servers, in database app, as a superuser:
--   psql -h shard1.example -p 5432 -d app -U postgres -f 1_shard.sql
--   psql -h shard2.example -p 5432 -d app -U postgres -f 1_shard.sql
-- Replace the password below; 2_coordinator.sql gives the coordinator the
-- same one.  The shard's pg_hba.conf must ask wals_reader for it, e.g.
--   host  app  wals_reader  10.0.0.0/24  scram-sha-256
-- (the coordinator's address): postgres_fdw lets a role other than a
-- superuser connect only with a password that the server asked for.
\set reader_password 'change-me'

CREATE EXTENSION wals;

-- The role the coordinator's connections log in as, for every role that
-- trains there (their user mappings name it).
CREATE ROLE wals_reader LOGIN PASSWORD :'reader_password';

-- The functions a sharded training calls here are granted to no role when
-- wals is installed: a DBA names the roles that may take part.
CREATE ROLE wals_shard_peer NOLOGIN;
GRANT EXECUTE ON FUNCTION wals_shard_load, wals_shard_ids, wals_shard_id_page, wals_shard_plan,
  wals_shard_plan_page, wals_shard_route, wals_shard_outbox, wals_shard_inbox, wals_shard_start,
  wals_shard_put, wals_shard_solve, wals_shard_take, wals_shard_loss, wals_shard_rated,
  wals_shard_end TO wals_shard_peer;
GRANT wals_shard_peer TO wals_reader;

-- This shard's part of the ratings.  A training reads it as wals_reader,
-- with wals_reader's privileges and row security here: reading is all it
-- needs.
CREATE TABLE ratings_part (user_id bigint NOT NULL, item_id bigint NOT NULL, rating real NOT NULL);
GRANT SELECT ON ratings_part TO wals_reader;
