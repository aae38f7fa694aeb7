-- Edge calls: extreme k, huge arrays, extreme parameters and ratings, the
-- extreme ids.  Each either works or fails with a precise SQLSTATE; none
-- may reach an internal error (XX000) or crash the backend.
SET client_min_messages = warning;
CREATE TABLE edge_src AS
SELECT u AS user_id, (u * 7 + g) % 40 + 1 AS item_id, (1 + g % 5)::real AS rating
FROM generate_series(1, 200) u, generate_series(1, 6) g
UNION ALL
SELECT -9223372036854775808, 1, 1 UNION ALL SELECT 9223372036854775807, 2, 1;
SELECT users, items FROM wals_train('edge_src', 'user_id', 'item_id', 'rating', model => 'edge',
                                    factors => 8, iterations => 3);

-- The SQLSTATE of a statement, or 'ok'.
CREATE FUNCTION edge_state(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE statement;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

CREATE TABLE edge_calls (n serial, call text, sqlstate text);
INSERT INTO edge_calls (call) VALUES
-- k at and past its limits
($$SELECT count(*) FROM wals_recommend(1, 1000000, 'edge')$$),
($$SELECT count(*) FROM wals_recommend(1, 1000001, 'edge')$$),
($$SELECT count(*) FROM wals_recommend(1, 2147483647, 'edge')$$),
($$SELECT count(*) FROM wals_recommend(1, -2147483648, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_batch(ARRAY[1, 2, 3], 1000000, 'edge')$$),
($$SELECT count(*) FROM wals_similar_items(1, 2147483647, 'edge')$$),
($$SELECT count(*) FROM wals_similar_items(1, 1000000, 'edge')$$),
($$SELECT count(*) FROM wals_explain(1, 1, 'edge', 2147483647)$$),
($$SELECT count(*) FROM wals_explain(1, 1, 'edge', 1000000)$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1, 2], NULL, 1000000, 'edge')$$),
($$SELECT * FROM wals_evaluate('edge', 'edge_src', 'user_id', 'item_id', NULL, 2147483647)$$),
-- the extreme ids
($$SELECT count(*) FROM wals_recommend(-9223372036854775808, 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend(9223372036854775807, 5, 'edge')$$),
($$SELECT wals_predict(9223372036854775807, 2, 'edge')$$),
($$SELECT count(*) FROM wals_similar_items(-9223372036854775808, 5, 'edge')$$),
-- huge and odd arrays
($$SELECT count(*) FROM wals_recommend_batch(ARRAY(SELECT generate_series(-50000, 50000)::bigint), 3, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(array_fill(7::bigint, ARRAY[200000]), NULL, 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY(SELECT generate_series(1, 200000)::bigint), NULL, 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items('{}'::bigint[], NULL, 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[[1, 2], [3, 4]]::bigint[], NULL, 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1, 2], ARRAY[1]::real[], 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1, 2], ARRAY[[1], [2]]::real[], 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1, NULL], NULL, 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_batch(ARRAY[1, NULL]::bigint[], 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend(1, 5, 'edge', exclude_items => array_fill(1::bigint, ARRAY[300000]))$$),
($$SELECT count(*) FROM wals_recommend(1, 5, 'edge', only_items => ARRAY(SELECT generate_series(1, 300000)::bigint))$$),
($$SELECT wals_refresh_users(ARRAY(SELECT generate_series(1000, 1500)::bigint), 'edge')$$),
-- extreme ratings given to fold-in: not finite, a dislike, summing past
-- a real, confidences that overflow
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1], ARRAY['NaN']::real[], 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1], ARRAY['-Infinity']::real[], 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1], ARRAY[-1]::real[], 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1], ARRAY[-3e38]::real[], 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1, 1], ARRAY[-3e38, -3e38]::real[], 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1, 1], ARRAY[3e38, 3e38]::real[], 5, 'edge')$$),
($$SELECT count(*) FROM wals_recommend_items(ARRAY[1], ARRAY[3e38]::real[], 5, 'edge')$$),
-- extreme training parameters
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', factors => 2147483647)$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', factors => -2147483648)$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', iterations => 2147483647)$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', cg_steps => 2147483647)$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', workers => 2147483647)$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', regularization => 3e38)$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', regularization => 'NaN')$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', alpha => '-Infinity')$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', unobserved_weight => 'Infinity')$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', tolerance => 'NaN')$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => repeat('m', 100000))$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', iterations => 1, seed => -2147483648)$$),
($$SELECT * FROM wals_train('edge_src', 'user_id', 'item_id', model => 'edge_t', iterations => 1, factors => 1024, replace => true)$$);

UPDATE edge_calls SET sqlstate = edge_state(call);
SELECT n, sqlstate, call FROM edge_calls ORDER BY n;
SELECT count(*) AS internal_errors FROM edge_calls WHERE sqlstate = 'XX000';

-- A rating whose confidence overflows a real: the training fails naming the
-- user whose row cannot be solved, on either solver, and leaves no model.
CREATE TABLE edge_overflow AS
SELECT user_id, item_id, rating::float8 AS rating FROM edge_src
UNION ALL SELECT 77, 5, 1e38;
\set VERBOSITY terse
SELECT * FROM wals_train('edge_overflow', 'user_id', 'item_id', 'rating', model => 'edge_o',
                         factors => 8, alpha => 1e6, solver => 'cholesky', device => 'cpu');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('edge_overflow', 'user_id', 'item_id', 'rating', model => 'edge_o',
                         factors => 8, alpha => 1e6, solver => 'cg', device => 'cpu');
\echo :LAST_ERROR_SQLSTATE
-- ratings that sum past the range of a real, and one past it already
INSERT INTO edge_overflow VALUES (1, 1, 3e38), (1, 1, 3e38);
SELECT * FROM wals_train('edge_overflow', 'user_id', 'item_id', 'rating', model => 'edge_o');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO edge_overflow VALUES (2, 1, 1e39);
SELECT * FROM wals_train('edge_overflow', 'user_id', 'item_id', 'rating', model => 'edge_o');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT count(*) AS models_left FROM wals_models WHERE model = 'edge_o';

SELECT wals_drop_model('edge');
SELECT wals_drop_model('edge_t');
DROP TABLE edge_calls, edge_src, edge_overflow;
DROP FUNCTION edge_state(text);
