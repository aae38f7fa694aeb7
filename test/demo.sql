-- The demo: a sample data set made in SQL, a training, and recommendations.
\set ON_ERROR_STOP on
\pset footer off
CREATE EXTENSION IF NOT EXISTS wals;

-- 2,000 listeners and 480 songs in 8 genres: song s is in genre (s - 1) % 8
-- and listener u prefers genre u % 8.  Four plays in five go to the
-- listener's genre, where low song numbers are the hits; the rest are random.
SELECT setseed(0.42) AS seeded \gset
CREATE TABLE plays AS
SELECT listener_id, song_id, count(*)::int AS plays
FROM (SELECT u AS listener_id,
             CASE WHEN random() < 0.8
                  THEN u % 8 + 8 * floor(power(random(), 2) * 60)::int + 1
                  ELSE floor(random() * 480)::int + 1 END AS song_id
      FROM generate_series(1, 2000) u, generate_series(1, 25) n) s
GROUP BY listener_id, song_id;
CREATE INDEX ON plays (listener_id);
SELECT count(*) AS plays_rows, count(DISTINCT listener_id) AS listeners,
       count(DISTINCT song_id) AS songs FROM plays;

\echo
\echo 'Training: wals_train(''plays'', ''listener_id'', ''song_id'', ''plays'', factors => 16, iterations => 10, regularization => 0.05)'
SELECT model, users, items, ratings, factors, iterations, round(loss::numeric, 2) AS loss,
       device, round(load_s::numeric, 3) AS load_s, round(train_s::numeric, 3) AS train_s,
       round(store_s::numeric, 3) AS store_s, round(total_s::numeric, 3) AS total_s
FROM wals_train('plays', 'listener_id', 'song_id', 'plays', factors => 16, iterations => 10,
                regularization => 0.05);

\echo 'Loss per iteration (wals_training_log):'
SELECT iteration, round(loss::numeric, 2) AS loss FROM wals_training_log
WHERE model = 'plays' ORDER BY iteration;

\echo 'Top 5 songs for listeners 1, 2 and 3 (songs they have not played yet):'
SELECT l AS listener_id, l % 8 AS favourite_genre, r.item_id AS song_id,
       (r.item_id - 1) % 8 AS song_genre, round(r.score::numeric, 4) AS score
FROM generate_series(1, 3) l, LATERAL wals_recommend(l, 5, model => 'plays') r;

\echo 'How many of the top 10 songs are in the listener''s favourite genre (listeners 1-100):'
SELECT round(avg(((r.item_id - 1) % 8 = l % 8)::int) * 100, 1) AS percent_in_genre
FROM generate_series(1, 100) l, LATERAL wals_recommend(l, 10, model => 'plays') r;

\echo 'Predicted affinity of listener 1 (favourite genre 1) for song 2 (genre 1) and for song 3 (genre 2):'
SELECT round(wals_predict(1, 2, model => 'plays')::numeric, 4) AS song_2_same_genre,
       round(wals_predict(1, 3, model => 'plays')::numeric, 4) AS song_3_other_genre;

\echo 'A new listener who just played songs 1, 9 and 17 (all genre 0), folded in:'
SELECT r.item_id AS song_id, (r.item_id - 1) % 8 AS song_genre, round(r.score::numeric, 4) AS score
FROM wals_recommend_items('{1, 9, 17}', '{3, 2, 1}', 5, model => 'plays') r;

\echo 'Songs most similar to song 1 (cosine of their factors):'
SELECT s.item_id AS song_id, (s.item_id - 1) % 8 AS song_genre,
       round(s.similarity::numeric, 4) AS similarity
FROM wals_similar_items(1, 5, model => 'plays') s;

\echo 'Why listener 1 gets its top song: the played songs that contribute most:'
SELECT e.rated_item_id AS played_song_id, round(e.contribution::numeric, 4) AS contribution
FROM wals_explain(1, (SELECT item_id FROM wals_recommend(1, 1, model => 'plays')), model => 'plays') e
LIMIT 3;
