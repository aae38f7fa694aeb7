-- Fresh recommendations with pg_cron, step 2 of 2: on the server that
-- trains, in database app, as analyst (the owner of model shop.clicks,
-- which 4_refresh_model.sql trained; the jobs run as analyst):
--   psql -h coordinator.example -p 5432 -d app -U analyst -f 5_refresh_schedule.sql
-- Nothing to replace.  Every five minutes the clicks changed since the
-- model's mark are taken in: the users who clicked solved again, new items
-- solved, the mark advanced; serving sees them at once.  At 03:30 every
-- night the model is trained again from all of its clicks.  The two never
-- overlap: each takes the model's lock, and a refresh that comes during the
-- retraining waits for its commit, then reads from the retraining's mark.
SELECT cron.schedule('wals-clicks-refresh', '*/5 * * * *', $$
  SELECT ratings, users, new_users, items, new_items, mark, refresh_s
  FROM wals_refresh('shop.clicks')
$$);
SELECT cron.schedule('wals-clicks-nightly', '30 3 * * *', $$
  SELECT model, iterations, loss FROM wals_retrain('shop.clicks',
    warm_start => true, tolerance => 0.001)
$$);

-- How fresh the model is: the column it follows, its mark (the highest
-- value taken in), its last refresh, and how many rows the refreshes took
-- in since its last training.
SELECT changed_col, changed_mark, refreshed_at, refreshed_ratings, trained_at
FROM wals_models WHERE (schema, model) = ('shop', 'clicks');
