-- Early stopping on a held-out share of the ratings (validation) or the
-- cells of a table (validation_table), by validation_metric (ndcg@20
-- unless given) and patience: the training stops once patience iterations
-- have not beaten the best score and keeps the best iterate.  Scores are compared, not
-- printed: their last digits depend on the CPU's kernels.
SET client_min_messages = warning;

CREATE TABLE val AS
SELECT u AS user_id, (u * 7 + g * 13 + (u * g) % 11) % 200 + 1 AS item_id,
       (1 + (u + g) % 5)::real AS rating
FROM generate_series(1, 600) u, generate_series(1, 12) g;

-- A small regularization over-fits after a few iterations, so the
-- validation score peaks and the training stops well before 40.
SELECT iterations < 40 AS stopped_early
FROM wals_train('val', 'user_id', 'item_id', 'rating', model => 'val_a', factors => 16,
                iterations => 40, regularization => 0.001, validation => 0.2, patience => 2);
SELECT validation, validation_table, validation_metric, patience,
       best_iteration BETWEEN 1 AND iterations - 2 AS best_before_patience,
       iterations - best_iteration AS after_best, validation_score > 0 AS scored
FROM wals_models WHERE model = 'val_a';
-- the score never rises steeply, so every iteration is scored; the best is
-- the one recorded, and beats the rest
SELECT count(*) = (SELECT iterations FROM wals_models WHERE model = 'val_a') AS all_scored,
       max(validation_score) = (SELECT validation_score FROM wals_models WHERE model = 'val_a')
         AS best_recorded
FROM wals_training_log WHERE model = 'val_a' AND validation_score IS NOT NULL;
-- the model is the best iterate: the same training stopped there by its
-- iterations has the same factors and loss, bit for bit
SELECT 1 FROM wals_train('val', 'user_id', 'item_id', 'rating', model => 'val_b', factors => 16,
                         iterations => (SELECT best_iteration FROM wals_models WHERE model = 'val_a'),
                         regularization => 0.001, validation => 0.2, patience => 1000);
SELECT (SELECT count(*) FROM val_a_user_factors a JOIN val_b_user_factors b USING (user_id)
        WHERE a.factors IS DISTINCT FROM b.factors) +
       (SELECT count(*) FROM val_a_item_factors a JOIN val_b_item_factors b USING (item_id)
        WHERE a.factors IS DISTINCT FROM b.factors) AS factors_differing,
       a.loss = b.loss AS same_loss
FROM wals_models a, wals_models b WHERE a.model = 'val_a' AND b.model = 'val_b';
-- held-out cells are rated items too: serving leaves every rated item out
SELECT count(*) AS recommended_rated
FROM wals_recommend(5, 50, 'val_a') r JOIN val v ON v.user_id = 5 AND v.item_id = r.item_id;
-- with a parallel worker: the same split, scores and stop
SELECT iterations = (SELECT iterations FROM wals_models WHERE model = 'val_a') AS same_stop
FROM wals_train('val', 'user_id', 'item_id', 'rating', model => 'val_w', factors => 16,
                iterations => 40, regularization => 0.001, validation => 0.2, patience => 2,
                workers => 1);
-- Where the score rises steeply (by more than 5% of its value in one
-- iteration), the next iteration is not scored, the one after it is; the
-- first and the last are always scored.  Users of ten groups of 20 items,
-- from factors near zero: the score climbs for a few iterations.
CREATE TABLE grp AS
SELECT DISTINCT u AS user_id,
       CASE WHEN g <= 10 THEN (u % 10) * 20 + (u * g * 7 + g) % 20 + 1
            ELSE (u * g * 37) % 200 + 1 END AS item_id
FROM generate_series(1, 800) u, generate_series(1, 12) g;
SELECT 1 FROM wals_train('grp', 'user_id', 'item_id', model => 'val_s', factors => 8,
                         iterations => 15, regularization => 0.1, init_std => 0.0001,
                         validation => 0.2, patience => 3, validation_metric => 'recall@10');
WITH l AS (
  SELECT iteration AS i, validation_score AS s FROM wals_training_log WHERE model = 'val_s'),
scored AS (
  SELECT i, s, lag(i) OVER (ORDER BY i) AS pi, lag(s) OVER (ORDER BY i) AS ps
  FROM l WHERE s IS NOT NULL),
steep AS (
  SELECT i, pi IS NOT NULL AND s - ps > 0.05 * abs(s) * (i - pi) AS steep FROM scored)
SELECT count(*) FILTER (WHERE l.s IS NULL) > 0 AS some_skipped,
       bool_and((l.s IS NULL) = (coalesce(p.steep, false) AND l.i < (SELECT max(i) FROM l)))
         AS skipped_after_steep_rises_only,
       bool_and(l.s IS NOT NULL) FILTER (WHERE l.i IN (1, (SELECT max(i) FROM l)))
         AS first_and_last_scored,
       (SELECT best_iteration FROM wals_models WHERE model = 'val_s') IN
         (SELECT i FROM scored) AS best_is_scored
FROM l LEFT JOIN steep p ON p.i = l.i - 1;

-- without validation, nothing is recorded
SELECT 1 FROM wals_train('val', 'user_id', 'item_id', 'rating', model => 'val_n', factors => 8,
                         iterations => 2);
SELECT validation IS NULL AND validation_table IS NULL AND validation_metric IS NULL
       AND patience IS NULL AND best_iteration IS NULL AND validation_score IS NULL
       AS nothing_recorded FROM wals_models WHERE model = 'val_n';

-- Another metric: the share's scores are recall@10, another stop.
SELECT 1 FROM wals_train('val', 'user_id', 'item_id', 'rating', model => 'val_r', factors => 16,
                         iterations => 40, regularization => 0.001, validation => 0.2,
                         validation_metric => 'recall@10');
SELECT r.validation_metric, r.validation_score <> a.validation_score AS other_scores
FROM wals_models r, wals_models a WHERE r.model = 'val_r' AND a.model = 'val_a';

-- A validation table: the caller's own held-out cells, kept out of the
-- source.  Its score is wals_evaluate's on that table, of the model kept.
CREATE TABLE val_train AS SELECT * FROM val WHERE (user_id * 3 + item_id) % 5 <> 0;
CREATE TABLE val_test AS
SELECT user_id::bigint AS user_id, item_id::smallint AS item_id FROM val
WHERE (user_id * 3 + item_id) % 5 = 0
UNION ALL SELECT NULL, 1                -- NULL ids are left out
UNION ALL SELECT 999999, 1              -- so are unknown users
UNION ALL SELECT 1, 32000               -- and items
UNION ALL SELECT user_id, item_id FROM val_train WHERE user_id < 10;  -- and training cells
SELECT 1 FROM wals_train('val_train', 'user_id', 'item_id', 'rating', model => 'val_t',
                         factors => 16, iterations => 40, regularization => 0.001,
                         validation_table => 'val_test', validation_metric => 'recall@10',
                         patience => 2);
SELECT m.validation IS NULL AS no_share, m.validation_table, m.validation_metric,
       m.best_iteration < 40 AS stopped_early,
       abs(m.validation_score - e.value) < 1e-3 AS evaluate_agrees
FROM wals_models m,
     wals_evaluate('val_t', 'val_test', 'user_id', 'item_id', k => 10) e
WHERE m.model = 'val_t' AND e.metric = 'recall@10';
-- the validation cells are not rated items: they may be recommended
SELECT m.ratings = (SELECT count(DISTINCT (user_id, item_id)) FROM val_train)
       AS rated_training_cells_only
FROM wals_models m WHERE m.model = 'val_t';

-- Explicit ratings, by the RMSE of the held-out ratings: lower is better,
-- so the best iterate is the lowest, and a training that fits ratings of
-- pure noise stops where the held-out error starts to rise.
CREATE TABLE val_noise AS
SELECT user_id, item_id, (1 + abs(hashint4(user_id * 31 + item_id)) % 5)::real AS rating
FROM val;
SELECT iterations < 40 AS stopped_early
FROM wals_train('val_noise', 'user_id', 'item_id', 'rating', model => 'val_e', factors => 16,
                iterations => 40, regularization => 0.0001, feedback => 'explicit',
                validation => 0.2, patience => 2, validation_metric => 'rmse');
SELECT m.validation_metric, m.validation_score BETWEEN 0 AND 5 AS an_rmse,
       m.validation_score = (SELECT min(validation_score) FROM wals_training_log l
                             WHERE l.model = 'val_e' AND l.version = m.version) AS lowest_kept,
       m.best_iteration < m.iterations AS over_fitting_left_behind
FROM wals_models m WHERE m.model = 'val_e';
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('val_e')) d;
DROP TABLE val_noise;

-- Bad arguments, each naming itself.
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation_metric => 'recall@10');
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation => 0.1,
                         validation_table => 'val_test');
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation => 0.1,
                         validation_metric => 'rmse');
SELECT * FROM wals_train('val', 'user_id', 'item_id', 'rating', feedback => 'explicit',
                         validation_table => 'val_test', validation_metric => 'rmse');
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation => 0.1,
                         validation_metric => 'ndcg@0');
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation_table => 'val');
SELECT * FROM wals_train('val', 'user_id', 'rating', validation_table => 'val_test');
CREATE TABLE val_text AS SELECT user_id, item_id::text AS item_id FROM val_test;
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation_table => 'val_text');
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation_table => 'val_no_such');

-- An ordinary role reads the validation table with its own privileges.
CREATE ROLE val_tenant;
CREATE SCHEMA val_own AUTHORIZATION val_tenant;
GRANT SELECT ON val_train TO val_tenant;
SET ROLE val_tenant;
\set VERBOSITY sqlstate
SELECT * FROM wals_train('val_train', 'user_id', 'item_id', model => 'val_own.m', factors => 8,
                         validation_table => 'val_test');
\set VERBOSITY default
RESET ROLE;
CREATE POLICY val_some ON val_test USING (user_id < 100);
ALTER TABLE val_test ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON val_test TO val_tenant;
SET ROLE val_tenant;
SELECT 1 FROM wals_train('val_train', 'user_id', 'item_id', model => 'val_own.m', factors => 8,
                         iterations => 3, validation_table => 'val_test', patience => 100);
RESET ROLE;
-- row security applied: the tenant's scores are over the rows it sees
CREATE VIEW val_test_some AS SELECT * FROM val_test WHERE user_id < 100;
SELECT abs(m.validation_score - e.value) < 1e-3 AS over_visible_rows
FROM wals_models m, wals_evaluate('val_own.m', 'val_test_some', 'user_id', 'item_id', k => 20) e
WHERE m.model = 'm' AND m.schema = 'val_own' AND e.metric = 'ndcg@20';
DROP VIEW val_test_some;

-- Bad arguments, each naming itself.
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation => 0);
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation => 0.7);
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation => 'NaN');
SELECT * FROM wals_train('val', 'user_id', 'item_id', patience => 3);
SELECT * FROM wals_train('val', 'user_id', 'item_id', validation => 0.1, patience => 0);
CREATE TABLE val_one AS SELECT g AS user_id, g AS item_id, 1::real AS rating
FROM generate_series(1, 50) g;
SELECT * FROM wals_train('val_one', 'user_id', 'item_id', validation => 0.3);

SELECT count(*) AS dropped FROM (SELECT wals_drop_model(model) FROM wals_models
                                 WHERE model LIKE 'val\_%') d;
SELECT count(*) AS dropped FROM (SELECT wals_drop_model('val_own.m')) d;
DROP SCHEMA val_own;
REVOKE SELECT ON val_train, val_test FROM val_tenant;
DROP ROLE val_tenant;
DROP TABLE val, val_one, val_train, val_test, val_text, grp;
