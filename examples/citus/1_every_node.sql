-- Sharded training over Citus, step 1 of 4: on every node (the coordinator
-- and the two workers), in database app, as a superuser, once its
-- postgresql.conf has shared_preload_libraries = 'citus' and it has
-- restarted:
--   psql -h coordinator.example -p 5432 -d app -U postgres -f 1_every_node.sql
--   psql -h worker1.example -p 5432 -d app -U postgres -f 1_every_node.sql
--   psql -h worker2.example -p 5432 -d app -U postgres -f 1_every_node.sql
-- Nothing to replace.  Citus reaches the database of the same name on each
-- worker.
CREATE EXTENSION citus;
