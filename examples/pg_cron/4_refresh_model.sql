-- Fresh recommendations with pg_cron, step 1 of 2 (after 1_postgresql.conf
-- and 2_cron.sql): on the server that trains, in database app, as analyst,
-- with the clicks so far as CSV lines (user_id,item_id,clicks) on psql's
-- standard input:
--   psql -h coordinator.example -p 5432 -d app -U analyst -f 4_refresh_model.sql < clicks.csv
-- Nothing to replace.  The shop's clicks, one row per user and item, whose
-- changed_at says when the row last changed, and a model trained from them
-- that records that column: wals_refresh takes in the rows changed since.
CREATE TABLE shop.clicks (
  user_id bigint NOT NULL,
  item_id bigint NOT NULL,
  clicks real NOT NULL DEFAULT 1,
  changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (user_id, item_id)
);
-- wals_refresh finds the rows changed since its mark by this index, and
-- reads the clicks of the users they touch by the primary key.
CREATE INDEX ON shop.clicks (changed_at);
-- What the refresh reads the clicks of the items it solves by.
CREATE INDEX ON shop.clicks (item_id);

\copy shop.clicks (user_id, item_id, clicks) FROM pstdin WITH (FORMAT csv)
ANALYZE shop.clicks;

SELECT model, users, items, ratings
FROM wals_train('shop.clicks', 'user_id', 'item_id', 'clicks', model => 'shop.clicks',
                changed_col => 'changed_at');
