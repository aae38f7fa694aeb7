-- Sharded training over postgres_fdw, step 2 of 4: on the coordinator (the
-- server that trains and serves), in database app, as a superuser:
--   psql -h coordinator.example -p 5432 -d app -U postgres -f 2_coordinator.sql
-- Replace the shards' hosts and ports, the password of wals_reader given in
-- 1_shard.sql, and the analyst's own password.
\set shard1_host 'shard1.example'
\set shard1_port '5432'
\set shard2_host 'shard2.example'
\set shard2_port '5432'
\set reader_password 'change-me'
\set analyst_password 'change-me-too'

CREATE EXTENSION wals;
CREATE EXTENSION postgres_fdw;

-- The analyst, an ordinary role, trains and serves the model in schema
-- shop: since PostgreSQL 15 no role but the owner may create in public.
CREATE ROLE analyst LOGIN PASSWORD :'analyst_password';
CREATE SCHEMA shop;
GRANT USAGE, CREATE ON SCHEMA shop TO analyst;

CREATE SERVER shard1 FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host :'shard1_host', port :'shard1_port', dbname 'app');
CREATE SERVER shard2 FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host :'shard2_host', port :'shard2_port', dbname 'app');

-- A training connects to the shards with its caller's user mappings.  For
-- a role other than a superuser postgres_fdw requires a password in the
-- mapping, which the shard must have asked for (password_required 'false',
-- which only a superuser may set, would waive both, for a shard that
-- authenticates the coordinator otherwise, by certificate).
CREATE USER MAPPING FOR analyst SERVER shard1
  OPTIONS (user 'wals_reader', password :'reader_password');
CREATE USER MAPPING FOR analyst SERVER shard2
  OPTIONS (user 'wals_reader', password :'reader_password');

-- Partitions by ranges of users, so that each shard's rows are known by
-- their ids and can be loaded straight into it (3_load_shard1.sql and
-- 3_load_shard2.sql pick them by the same bounds).  Each shard owns its
-- users, and sends none of their cells to the other.
CREATE TABLE shop.ratings (user_id bigint NOT NULL, item_id bigint NOT NULL, rating real NOT NULL)
  PARTITION BY RANGE (user_id);
CREATE FOREIGN TABLE shop.ratings_1 PARTITION OF shop.ratings
  FOR VALUES FROM (MINVALUE) TO (1000000) SERVER shard1
  OPTIONS (schema_name 'public', table_name 'ratings_part');
CREATE FOREIGN TABLE shop.ratings_2 PARTITION OF shop.ratings
  FOR VALUES FROM (1000000) TO (MAXVALUE) SERVER shard2
  OPTIONS (schema_name 'public', table_name 'ratings_part');
GRANT SELECT ON shop.ratings TO analyst;
