-- Negative implicit ratings are dislikes: target 0 with confidence
-- 1 + alpha |r| (doc/training.md).  A disliked item leaves the user's top
-- 10, rated items allowed back, after a training and in a fold-in alike;
-- repeated pairs are summed first, and the sum's sign decides.
SET client_min_messages = warning;
CREATE TABLE taste AS
SELECT u AS user_id, (u * 7 + g * 13) % 60 + 1 AS item_id, (1 + (u + g) % 4)::real AS r
FROM generate_series(1, 300) u, generate_series(1, 8) g;
SELECT model, ratings FROM wals_train('taste', 'user_id', 'item_id', 'r', model => 'liked',
    factors => 8, iterations => 8, solver => 'cholesky');
-- user 5's top 10 with its rated items allowed back, best first
CREATE FUNCTION top10(model text) RETURNS bigint[] LANGUAGE sql
AS $$ SELECT array_agg(item_id ORDER BY ord)
      FROM wals_recommend(5, 10, model, exclude_rated => false) WITH ORDINALITY r(item_id, score, ord) $$;
-- the best of them that user 5 has not rated
CREATE TABLE pick AS
SELECT i AS item_id FROM unnest(top10('liked')) WITH ORDINALITY t(i, o)
WHERE i NOT IN (SELECT item_id FROM taste WHERE user_id = 5) ORDER BY o LIMIT 1;
SELECT count(*) AS picked FROM pick;

-- user 5 dislikes it: out of the top 10 once trained on
INSERT INTO taste SELECT 5, item_id, -4 FROM pick;
SELECT model, ratings FROM wals_train('taste', 'user_id', 'item_id', 'r', model => 'disliked',
    factors => 8, iterations => 8, solver => 'cholesky');
SELECT p.item_id = ANY (top10('liked')) AS in_top10_before,
       p.item_id = ANY (top10('disliked')) AS in_top10_disliked
FROM pick p;

-- -6 and 2 for the same pair sum to the same dislike: the same model
UPDATE taste SET r = -6 WHERE user_id = 5 AND r = -4;
INSERT INTO taste SELECT 5, item_id, 2 FROM pick;
SELECT model, ratings FROM wals_train('taste', 'user_id', 'item_id', 'r', model => 'summed',
    factors => 8, iterations => 8, solver => 'cholesky');
SELECT max(abs(a.score - b.score)) < 1e-5 AS summed_first
FROM wals_recommend(5, 60, 'summed', exclude_rated => false) a
JOIN wals_recommend(5, 60, 'disliked', exclude_rated => false) b USING (item_id);

-- fold-in: user 5's ratings rebuild a top 10 that holds the item; with the
-- dislike among them it leaves, and -6 with 2 is again -4
CREATE TABLE given AS
SELECT array_agg(item_id::bigint ORDER BY item_id) AS items, array_agg(r ORDER BY item_id) AS ratings
FROM taste WHERE user_id = 5 AND r > 0 AND item_id NOT IN (SELECT item_id FROM pick);
CREATE FUNCTION folded(items bigint[], ratings real[]) RETURNS bigint[] LANGUAGE sql
AS $$ SELECT array_agg(item_id) FROM wals_recommend_items(items, ratings, 10, 'liked', exclude_rated => false) $$;
SELECT p.item_id = ANY (folded(g.items, g.ratings)) AS folded_in_top10,
       p.item_id = ANY (folded(g.items || p.item_id::bigint, g.ratings || (-4)::real)) AS disliked_in_top10,
       folded(g.items || p.item_id::bigint, g.ratings || (-4)::real) =
       folded(g.items || ARRAY[p.item_id, p.item_id]::bigint[], g.ratings || '{-6,2}'::real[]) AS summed_first
FROM pick p, given g;

-- a validation share trains with the dislikes (it never holds one out:
-- test/unit/test_holdout.c)
SELECT model, ratings FROM wals_train('taste', 'user_id', 'item_id', 'r', model => 'validated',
    factors => 8, iterations => 3, validation => 0.2);

SELECT wals_drop_model('liked'), wals_drop_model('disliked'), wals_drop_model('summed'),
       wals_drop_model('validated');
DROP FUNCTION top10(text);
DROP FUNCTION folded(bigint[], real[]);
DROP TABLE taste, pick, given;
