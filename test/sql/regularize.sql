-- Frequency-scaled regularization (regularization_exponent, s = (n + w0 N)^nu)
-- and the starting factors' scale (init_std).  Factors are compared, not
-- printed: their last digits depend on the CPU's kernels.
SET client_min_messages = warning;

CREATE TABLE reg AS
SELECT u AS user_id, (u * 7 + g * 13 + (u * g) % 11) % 200 + 1 AS item_id,
       (1 + (u + g) % 5)::real AS rating
FROM generate_series(1, 600) u, generate_series(1, 12) g;

-- Factors of model b that differ from those of model a, users and items.
CREATE FUNCTION reg_differ(a text, b text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint; m bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM %I x FULL JOIN %I y USING (user_id)
                  WHERE x.factors IS DISTINCT FROM y.factors', a || '_user_factors', b || '_user_factors')
    INTO n;
  EXECUTE format('SELECT count(*) FROM %I x FULL JOIN %I y USING (item_id)
                  WHERE x.factors IS DISTINCT FROM y.factors', a || '_item_factors', b || '_item_factors')
    INTO m;
  RETURN n + m;
END $$;

-- NULL is every earlier model, bit for bit: nu = 0 for implicit feedback,
-- nu = 1 for explicit feedback without an unobserved weight, and init_std
-- = 0.01 sqrt(f) start and end the same.
SELECT 1 FROM wals_train('reg', 'user_id', 'item_id', 'rating', model => 'reg_i', factors => 16,
                         iterations => 3);
SELECT 1 FROM wals_train('reg', 'user_id', 'item_id', 'rating', model => 'reg_i0', factors => 16,
                         iterations => 3, regularization_exponent => 0);
SELECT 1 FROM wals_train('reg', 'user_id', 'item_id', 'rating', model => 'reg_is', factors => 16,
                         iterations => 3, init_std => 0.04);
SELECT 1 FROM wals_train('reg', 'user_id', 'item_id', 'rating', model => 'reg_e', factors => 16,
                         iterations => 3, feedback => 'explicit');
SELECT 1 FROM wals_train('reg', 'user_id', 'item_id', 'rating', model => 'reg_e1', factors => 16,
                         iterations => 3, feedback => 'explicit', regularization_exponent => 1);
SELECT reg_differ('reg_i', 'reg_i0') AS implicit_nu_0, reg_differ('reg_i', 'reg_is') AS init_std,
       reg_differ('reg_e', 'reg_e1') AS explicit_nu_1;
SELECT (SELECT loss FROM wals_models WHERE model = 'reg_i') =
       (SELECT loss FROM wals_models WHERE model = 'reg_i0') AS same_loss;

-- Rendle et al.'s setting: nu = 1, a small unobserved weight, no extra
-- confidence, a small start.  A different model, recorded as trained; the
-- CG and Cholesky solvers and the subspace solver with one block agree.
SELECT 1 FROM wals_train('reg', 'user_id', 'item_id', 'rating', model => 'reg_f', factors => 16,
                         iterations => 4, regularization => 0.005, regularization_exponent => 1,
                         unobserved_weight => 0.05, alpha => 0, init_std => 0.1,
                         solver => 'cholesky');
SELECT 1 FROM wals_train('reg', 'user_id', 'item_id', 'rating', model => 'reg_fs', factors => 16,
                         iterations => 4, regularization => 0.005, regularization_exponent => 1,
                         unobserved_weight => 0.05, alpha => 0, init_std => 0.1,
                         solver => 'subspace', block_size => 16);
SELECT 1 FROM wals_train('reg', 'user_id', 'item_id', 'rating', model => 'reg_fc', factors => 16,
                         iterations => 4, regularization => 0.005, regularization_exponent => 1,
                         unobserved_weight => 0.05, alpha => 0, init_std => 0.1, cg_steps => 16,
                         workers => 1);
SELECT model, regularization_exponent, init_std, unobserved_weight FROM wals_models
WHERE model LIKE 'reg\_%' ORDER BY model;
SELECT reg_differ('reg_i', 'reg_f') > 0 AS differs_from_classic,
       abs(f.loss / s.loss - 1) < 1e-4 AS subspace_as_cholesky,
       abs(f.loss / c.loss - 1) < 1e-3 AS cg_as_cholesky
FROM wals_models f, wals_models s, wals_models c
WHERE f.model = 'reg_f' AND s.model = 'reg_fs' AND c.model = 'reg_fc';

-- Serving solves with the model's scale: wals_explain's terms add up to
-- the score that folding the user's ratings in gives, and a refreshed user
-- scores what the fold-in scores.
WITH rated AS (SELECT array_agg(item_id ORDER BY item_id) AS items,
                      array_agg(rating ORDER BY item_id) AS ratings
               FROM (SELECT item_id, sum(rating)::real AS rating FROM reg WHERE user_id = 5
                     GROUP BY item_id) r),
     folded AS (SELECT r.item_id, r.score
                FROM rated, wals_recommend_items(rated.items, rated.ratings, 3, 'reg_f') r)
SELECT abs((SELECT sum(contribution) FROM wals_explain(5, folded.item_id, 'reg_f', 100))
           - folded.score) < 1e-4 * abs(folded.score) + 1e-5 AS explain_adds_up
FROM folded ORDER BY folded.item_id;
SELECT wals_refresh_users('{5}', 'reg_f') IS NOT NULL AS refreshed;
WITH rated AS (SELECT array_agg(item_id ORDER BY item_id) AS items,
                      array_agg(rating ORDER BY item_id) AS ratings
               FROM (SELECT item_id, sum(rating)::real AS rating FROM reg WHERE user_id = 5
                     GROUP BY item_id) r)
SELECT bool_and(abs(a.score - b.score) <= 1e-5 * abs(b.score) + 1e-6) AS refresh_is_fold_in
FROM wals_recommend(5, 3, 'reg_f') a
JOIN (SELECT r.* FROM rated, wals_recommend_items(rated.items, rated.ratings, 3, 'reg_f') r) b
USING (item_id);

-- Bad arguments, each naming itself.
SELECT * FROM wals_train('reg', 'user_id', 'item_id', regularization_exponent => -0.5);
SELECT * FROM wals_train('reg', 'user_id', 'item_id', regularization_exponent => 2.5);
SELECT * FROM wals_train('reg', 'user_id', 'item_id', regularization_exponent => 'NaN');
SELECT * FROM wals_train('reg', 'user_id', 'item_id', init_std => -1);
SELECT * FROM wals_train('reg', 'user_id', 'item_id', init_std => 0);
SELECT * FROM wals_train('reg', 'user_id', 'item_id', init_std => 'Infinity');

SELECT count(*) AS dropped FROM (SELECT wals_drop_model(model) FROM wals_models
                                 WHERE model LIKE 'reg\_%') d;
DROP FUNCTION reg_differ(text, text);
DROP TABLE reg;
