-- Sharded training over Citus, step 2 of 4: on the coordinator, in database
-- app, as a superuser:
--   psql -h coordinator.example -p 5432 -d app -U postgres -f 2_coordinator.sql
-- Replace the hosts and ports by which the nodes reach each other, and the
-- analyst's password (which goes into a connection string below: no
-- spaces, quotes or backslashes).
\set coordinator_host 'coordinator.example'
\set coordinator_port 5432
\set worker1_host 'worker1.example'
\set worker1_port 5432
\set worker2_host 'worker2.example'
\set worker2_port 5432
\set analyst_password 'change-me-too'

SELECT citus_set_coordinator_host(:'coordinator_host', :coordinator_port);
SELECT citus_add_node(:'worker1_host', :worker1_port);
SELECT citus_add_node(:'worker2_host', :worker2_port);
CREATE EXTENSION wals;                  -- Citus creates it on the workers too

-- The analyst, an ordinary role, trains and serves the model in schema
-- shop.  Citus creates the roles, the grant of one to the other and the
-- schema on the workers too.
CREATE ROLE analyst LOGIN PASSWORD :'analyst_password';
CREATE ROLE wals_shard_peer NOLOGIN;
GRANT wals_shard_peer TO analyst;
CREATE SCHEMA shop;
GRANT USAGE, CREATE ON SCHEMA shop TO analyst;

-- The functions a sharded training calls on a worker are granted to no role
-- when wals is installed, and Citus carries no grant on an extension's
-- functions to its workers: grant them there (and on a worker added later).
SELECT run_command_on_workers($$GRANT EXECUTE ON FUNCTION wals_shard_load, wals_shard_ids,
  wals_shard_id_page, wals_shard_plan, wals_shard_plan_page, wals_shard_route, wals_shard_outbox,
  wals_shard_inbox, wals_shard_start, wals_shard_put, wals_shard_solve, wals_shard_take,
  wals_shard_loss, wals_shard_rated, wals_shard_end TO wals_shard_peer$$);

-- Citus reaches the workers as the analyst, for its queries and for the
-- trainings, with the password it keeps here for the role (unless the
-- workers' pg_hba.conf trusts the coordinator or it has certificates).
INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo)
  VALUES (0, 'analyst', 'password=' || :'analyst_password');

CREATE TABLE shop.ratings (user_id bigint NOT NULL, item_id bigint NOT NULL, rating real NOT NULL);
-- By user: a user's ratings live on one worker, which owns that user and
-- sends none of its cells to the other.
SELECT create_distributed_table('shop.ratings', 'user_id');
GRANT SELECT, INSERT ON shop.ratings TO analyst;
