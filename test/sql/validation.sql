-- Early stopping on a held-out share of the ratings (validation, patience):
-- the training stops once patience iterations have not beaten the best
-- validation ndcg@20 and keeps the best iterate.  Scores are compared, not
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
SELECT validation, patience, best_iteration BETWEEN 1 AND iterations - 2 AS best_before_patience,
       iterations - best_iteration AS after_best, validation_ndcg > 0 AS scored
FROM wals_models WHERE model = 'val_a';
-- every iteration is scored; the best is the one recorded, and beats the rest
SELECT count(*) = (SELECT iterations FROM wals_models WHERE model = 'val_a') AS all_scored,
       max(validation_ndcg) = (SELECT validation_ndcg FROM wals_models WHERE model = 'val_a')
         AS best_recorded
FROM wals_training_log WHERE model = 'val_a' AND validation_ndcg IS NOT NULL;
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
-- without validation, nothing is recorded
SELECT 1 FROM wals_train('val', 'user_id', 'item_id', 'rating', model => 'val_n', factors => 8,
                         iterations => 2);
SELECT validation IS NULL AND patience IS NULL AND best_iteration IS NULL AND validation_ndcg IS NULL
       AS nothing_recorded FROM wals_models WHERE model = 'val_n';

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
DROP TABLE val, val_one;
