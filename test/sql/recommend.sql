-- Serving beyond one user: item filters, batches, fold-in of new users,
-- similar items and explanations, with their argument errors.
SET client_min_messages = warning;
CREATE TABLE picks AS
SELECT u AS user_id, (u * 7 + g * 13) % 60 + 1 AS item_id, (1 + (u + g) % 4)::real AS r
FROM generate_series(1, 300) u, generate_series(1, 8) g;
SELECT model, users, items FROM wals_train('picks', 'user_id', 'item_id', 'r', model => 'picks',
    factors => 8, iterations => 8, solver => 'cholesky');
CREATE FUNCTION dot(a real[], b real[]) RETURNS float8 LANGUAGE sql IMMUTABLE
AS $$ SELECT sum(x * y) FROM unnest(a, b) AS t(x, y) $$;
-- the top n of user 5 as an array, best first
CREATE FUNCTION top(n int, excl bigint[] DEFAULT NULL, allowed bigint[] DEFAULT NULL,
                    rated bool DEFAULT true) RETURNS bigint[] LANGUAGE sql
AS $$ SELECT array_agg(item_id ORDER BY ord) FROM wals_recommend(5, n, 'picks', rated, excl, allowed)
      WITH ORDINALITY r(item_id, score, ord) $$;

-- exclude_items: the excluded items never come back, and k rows still do:
-- the unfiltered ranking with the excluded items taken out
SELECT top(10, (SELECT top(3))) = (SELECT array_agg(i ORDER BY o) FROM unnest(top(13)) WITH ORDINALITY t(i, o)
                                    WHERE i <> ALL (top(3))) AS exclude_items_exact;
SELECT cardinality(top(10, '{}')) AS empty_exclude, top(10, '{}') = top(10) AS same;
-- ids the model does not know match nothing
SELECT top(10, '{-1, 100000}') = top(10) AS unknown_excluded_ignored;

-- only_items: an allow-list, in the same order as the full ranking
SELECT top(3, NULL, '{1,2,3,4,5,6,7,8,9,10}') =
       (SELECT array_agg(i ORDER BY o) FROM unnest(top(60)) WITH ORDINALITY t(i, o) WHERE i <= 10 LIMIT 3)[1:3]
       AS only_items_exact;
-- rated items stay out of an allow-list unless exclude_rated is false
SELECT coalesce(cardinality(top(10, NULL, (SELECT array_agg(item_id::bigint) FROM picks WHERE user_id = 5))), 0) AS rated_only;
SELECT cardinality(top(10, NULL, (SELECT array_agg(item_id::bigint) FROM picks WHERE user_id = 5), false)) AS rated_allowed;
SELECT coalesce(cardinality(top(10, NULL, '{}')), 0) AS empty_allow_list,
       coalesce(cardinality(top(10, NULL, '{100000}')), 0) AS unknown_only;
-- both at once
SELECT top(10, '{1,2}', '{1,2,3,4,5,6}') <@ '{3,4,5,6}'::bigint[] AS both_filters;
-- a null element is an error
SELECT * FROM wals_recommend(5, 3, 'picks', exclude_items => '{1,NULL}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend(5, 3, 'picks', only_items => '{NULL}');
\echo :LAST_ERROR_SQLSTATE

-- wals_recommend_batch: the rows of wals_recommend for each user, in the
-- order given, with their rank
SELECT count(*) AS batch_mismatches
FROM (SELECT u AS user_id, r.item_id, r.score, r.ord::int AS rank
      FROM generate_series(1, 300) u, LATERAL wals_recommend(u, 7, 'picks') WITH ORDINALITY r(item_id, score, ord)) a
FULL JOIN wals_recommend_batch((SELECT array_agg(u) FROM generate_series(1, 300) u), 7, 'picks') b
  USING (user_id, rank)
WHERE a.item_id IS DISTINCT FROM b.item_id OR a.score IS DISTINCT FROM b.score;
SELECT count(*) AS filtered_batch_mismatches
FROM (SELECT u AS user_id, r.item_id, r.score, r.ord::int AS rank
      FROM generate_series(1, 300) u,
           LATERAL wals_recommend(u, 4, 'picks', false, '{1,2,3}', '{1,2,3,4,5,6,7,8,9,10,11,12}')
           WITH ORDINALITY r(item_id, score, ord)) a
FULL JOIN wals_recommend_batch((SELECT array_agg(u) FROM generate_series(1, 300) u), 4, 'picks', false,
                               '{1,2,3}', '{1,2,3,4,5,6,7,8,9,10,11,12}') b
  USING (user_id, rank)
WHERE a.item_id IS DISTINCT FROM b.item_id OR a.score IS DISTINCT FROM b.score;
-- input order, repeats kept, unknown users left out
SELECT user_id, rank FROM wals_recommend_batch('{3, 99999, 3, 1}', 2, 'picks');
SELECT count(*) FROM wals_recommend_batch('{}', 2, 'picks');
SELECT * FROM wals_recommend_batch(NULL, 2, 'picks');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend_batch('{1,NULL}', 2, 'picks');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend_batch('{1}', 0, 'picks');
\echo :LAST_ERROR_SQLSTATE

-- wals_recommend_items: a user rebuilt from their own ratings gets nearly
-- their trained scores, and the same top items
CREATE TEMP TABLE folded AS
SELECT u, f.item_id, f.score AS folded, wals_predict(u, f.item_id, 'picks') AS trained
FROM generate_series(1, 20) u,
     LATERAL wals_recommend_items((SELECT array_agg(item_id) FROM picks WHERE user_id = u),
                                  (SELECT array_agg(r) FROM picks WHERE user_id = u), 5, 'picks') f;
SELECT count(*) AS rows, max(abs(folded - trained)) < 0.05 AS near_trained FROM folded;
SELECT count(*) AS same_top5 FROM generate_series(1, 20) g(uid)
WHERE (SELECT array_agg(item_id ORDER BY item_id) FROM folded WHERE folded.u = g.uid) =
      (SELECT array_agg(item_id ORDER BY item_id) FROM wals_recommend(g.uid, 5, 'picks'));
-- the items given are not recommended back, unless exclude_rated is false
SELECT count(*) AS given_returned FROM wals_recommend_items('{1,2,3}', NULL, 60, 'picks') WHERE item_id <= 3;
SELECT count(*) AS given_allowed FROM wals_recommend_items('{1,2,3}', NULL, 60, 'picks', exclude_rated => false) WHERE item_id <= 3;
-- repeated items merge as in training (summed for implicit feedback)
SELECT (SELECT array_agg(item_id) FROM wals_recommend_items('{4,4,9}', '{1,2,5}', 5, 'picks')) =
       (SELECT array_agg(item_id) FROM wals_recommend_items('{4,9}', '{3,5}', 5, 'picks')) AS merged;
-- filters apply to fold-in too
SELECT count(*) AS only_two FROM wals_recommend_items('{4}', NULL, 10, 'picks', only_items => '{5,6}');
-- unknown items are ignored with a NOTICE; none known: no rows
SET client_min_messages = notice;
\set VERBOSITY terse
SELECT count(*) FROM wals_recommend_items('{4, 100000, -3}', NULL, 5, 'picks');
SELECT count(*) FROM wals_recommend_items('{100000}', NULL, 5, 'picks');
SET client_min_messages = warning;
SELECT count(*) FROM wals_recommend_items('{}', NULL, 5, 'picks');
-- errors
SELECT * FROM wals_recommend_items(NULL, NULL, 5, 'picks');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend_items('{1,2}', '{1}', 5, 'picks');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend_items('{1,NULL}', NULL, 5, 'picks');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend_items('{1,2}', '{1,NULL}', 5, 'picks');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend_items('{1,2}', '{1,NaN}', 5, 'picks');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_recommend_items('{1,2}', NULL, -1, 'picks');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default

-- wals_similar_items: cosine of the factors, best first, the item left out
SELECT count(*) AS rows, bool_and(s.item_id <> 7) AS self_left_out,
       max(abs(s.similarity - dot(a.factors, b.factors) /
               sqrt(dot(a.factors, a.factors) * dot(b.factors, b.factors)))) < 1e-5 AS is_cosine
FROM wals_similar_items(7, 10, 'picks') s, picks_item_factors a, picks_item_factors b
WHERE a.item_id = 7 AND b.item_id = s.item_id;
SELECT bool_and(similarity >= next) AS best_first
FROM (SELECT similarity, lead(similarity) OVER () AS next FROM wals_similar_items(7, 59, 'picks')) s
WHERE next IS NOT NULL;
SELECT count(*) AS all_others FROM wals_similar_items(7, 1000, 'picks');
SELECT count(*) AS unknown_item FROM wals_similar_items(100000, 5, 'picks');
SELECT count(*) AS null_item FROM wals_similar_items(NULL, 5, 'picks');

-- wals_explain: the terms of every rated item add up to the folded-in score
SELECT abs(sum(contribution) - (SELECT score FROM wals_recommend_items(
           (SELECT array_agg(item_id) FROM picks WHERE user_id = 5),
           (SELECT array_agg(r) FROM picks WHERE user_id = 5), 60, 'picks', exclude_rated => false)
         WHERE item_id = 30)) < 1e-4 AS terms_add_up,
       count(*) = (SELECT count(DISTINCT item_id) FROM picks WHERE user_id = 5) AS one_per_rated_item
FROM wals_explain(5, 30, 'picks', 1000);
SELECT bool_and(contribution >= next) AS largest_first, count(*) AS k
FROM (SELECT contribution, lead(contribution) OVER () AS next FROM wals_explain(5, 30, 'picks', 3)) s;
SELECT count(*) AS rated_items_only FROM wals_explain(5, 30, 'picks') e
WHERE rated_item_id NOT IN (SELECT item_id FROM picks WHERE user_id = 5);
SELECT count(*) AS unknown_user FROM wals_explain(100000, 30, 'picks');
SELECT count(*) AS unknown_item FROM wals_explain(5, 100000, 'picks');
SELECT * FROM wals_explain(5, 30, 'picks', 0);
\echo :LAST_ERROR_SQLSTATE

-- an explicit model: fold-in averages repeated ratings, as training does
SELECT model FROM wals_train('picks', 'user_id', 'item_id', 'r', model => 'stars',
    factors => 4, iterations => 6, feedback => 'explicit', regularization => 0.05);
SELECT (SELECT array_agg(item_id) FROM wals_recommend_items('{4,4,9}', '{1,3,5}', 5, 'stars')) =
       (SELECT array_agg(item_id) FROM wals_recommend_items('{4,9}', '{2,5}', 5, 'stars')) AS averaged;
SELECT abs(sum(contribution) - (SELECT score FROM wals_recommend_items(
           (SELECT array_agg(item_id) FROM picks WHERE user_id = 8),
           (SELECT array_agg(r) FROM picks WHERE user_id = 8), 60, 'stars', exclude_rated => false)
         WHERE item_id = 11)) < 1e-4 AS explicit_terms_add_up
FROM wals_explain(8, 11, 'stars', 1000);
-- negative ratings are legal for explicit feedback
SELECT count(*) FROM wals_recommend_items('{1,2}', '{-1,2}', 3, 'stars');

SELECT wals_drop_model('picks'), wals_drop_model('stars');
DROP FUNCTION top(int, bigint[], bigint[], bool);
DROP FUNCTION dot(real[], real[]);
DROP TABLE picks;
