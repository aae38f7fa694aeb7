-- Nightly retraining with pg_cron, step 2 of 3: on the server that trains,
-- in database app (cron.database_name), as a superuser, after the restart:
--   psql -h coordinator.example -p 5432 -d app -U postgres -f 2_cron.sql
-- Nothing to replace.
CREATE EXTENSION pg_cron;
-- The analyst schedules its own jobs; each runs as the role that scheduled
-- it, and only a model's owner may retrain it.
GRANT USAGE ON SCHEMA cron TO analyst;
