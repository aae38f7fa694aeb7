-- Nightly retraining with pg_cron, step 3 of 3: on the server that trains,
-- in database app, as analyst (the owner of the model, which train.sql
-- trained; the job runs as analyst):
--   psql -h coordinator.example -p 5432 -d app -U analyst -f 3_schedule.sql
-- Nothing to replace.  At 03:00 every night the model is trained again from
-- the source and with the settings it was trained with (those of its last
-- training or tuning), starting from the factors it has.
SELECT cron.schedule('wals-nightly', '0 3 * * *', $$
  SELECT model, iterations, loss FROM wals_retrain('shop.ratings',
    warm_start => true, tolerance => 0.001)
$$);
