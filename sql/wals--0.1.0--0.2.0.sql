-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION wals UPDATE TO '0.2.0'" to load this file. \quit

-- wals_recommend gains item filters.  Its argument list changes, so it is
-- dropped and created again: a view that calls it must be dropped first.
DROP FUNCTION wals_recommend(bigint, int, text, bool);

CREATE FUNCTION wals_recommend(
	user_id bigint,
	k int DEFAULT 10,
	model text DEFAULT NULL,
	exclude_rated bool DEFAULT true,
	exclude_items bigint[] DEFAULT NULL,
	only_items bigint[] DEFAULT NULL)
RETURNS TABLE(item_id bigint, score real)
AS 'MODULE_PATHNAME', 'wals_recommend'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED ROWS 10;

CREATE FUNCTION wals_recommend_batch(
	user_ids bigint[],
	k int DEFAULT 10,
	model text DEFAULT NULL,
	exclude_rated bool DEFAULT true,
	exclude_items bigint[] DEFAULT NULL,
	only_items bigint[] DEFAULT NULL)
RETURNS TABLE(user_id bigint, item_id bigint, score real, rank int)
AS 'MODULE_PATHNAME', 'wals_recommend_batch'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED ROWS 1000;

CREATE FUNCTION wals_recommend_items(
	item_ids bigint[],
	ratings real[] DEFAULT NULL,
	k int DEFAULT 10,
	model text DEFAULT NULL,
	exclude_rated bool DEFAULT true,
	exclude_items bigint[] DEFAULT NULL,
	only_items bigint[] DEFAULT NULL)
RETURNS TABLE(item_id bigint, score real)
AS 'MODULE_PATHNAME', 'wals_recommend_items'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED ROWS 10;

CREATE FUNCTION wals_similar_items(
	item_id bigint,
	k int DEFAULT 10,
	model text DEFAULT NULL)
RETURNS TABLE(item_id bigint, similarity real)
AS 'MODULE_PATHNAME', 'wals_similar_items'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED ROWS 10;

CREATE FUNCTION wals_explain(
	user_id bigint,
	item_id bigint,
	model text DEFAULT NULL,
	k int DEFAULT 10)
RETURNS TABLE(rated_item_id bigint, contribution real)
AS 'MODULE_PATHNAME', 'wals_explain'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED ROWS 10;

-- A model against held-out ratings: ranking metrics at k, AUC, RMSE of
-- explicit models, and how many test users and items could not be scored.
CREATE FUNCTION wals_evaluate(
	model text,
	test_source regclass,
	user_col name,
	item_col name,
	rating_col name DEFAULT NULL,
	k int DEFAULT 10)
RETURNS TABLE(metric text, value float8)
AS 'MODULE_PATHNAME', 'wals_evaluate'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED ROWS 11;

-- Solve some users again from their current ratings, against the current
-- item factors, and store their factors in place.
CREATE FUNCTION wals_refresh_users(
	user_ids bigint[],
	model text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'wals_refresh_users'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;
