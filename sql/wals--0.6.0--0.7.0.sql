/* sql/wals--0.6.0--0.7.0.sql */
\echo Use "ALTER EXTENSION wals UPDATE TO '0.7.0'" to load this file. \quit

-- 0.7.0: models kept fresh without a retraining.
--
-- changed_col names a column of the source that says when each rating last
-- changed, and changed_mark the highest value of it a training or refresh
-- has taken in (written by the type's output with DateStyle ISO and
-- TimeZone UTC, so that it reads back the same in any session);
-- wals_refresh reads the ratings above it.  serving_version is the version
-- serving keys its copies on once a refresh has changed the item factors
-- (NULL: the training's version); refreshed_at and refreshed_ratings say
-- when the last refresh ran and how many ratings refreshes have taken in
-- since the training.
ALTER TABLE @extschema@.wals_models
	ADD COLUMN changed_col text,
	ADD COLUMN changed_mark text,
	ADD COLUMN serving_version bigint,
	ADD COLUMN refreshed_at timestamptz,
	ADD COLUMN refreshed_ratings bigint NOT NULL DEFAULT 0;

-- What a refresh keeps of a model version beside its catalog row, out of
-- the way of SELECT * FROM wals_models: user_gram, XᵀX of the user
-- factors, f x f float4 in a bytea, so that a refresh solves new items
-- without reading every user; item_counts, the ratings of each item,
-- int4 in the order of the item ids, so that it can tell the items a
-- tenth of whose ratings changed.  Either NULL, or the version's row
-- missing (a model of 0.6.0, or restored by pg_restore, which does not
-- dump it), is learned again by the next refresh.  Read and written by
-- wals alone.
CREATE TABLE @extschema@.wals_model_state (
	version bigint PRIMARY KEY,
	user_gram bytea,
	item_counts bytea
);
REVOKE ALL ON @extschema@.wals_model_state FROM PUBLIC;

-- The items every backend serves of each model's serving version, as the
-- training or refresh that wrote the version built them: the shared area
-- (src/serve/items.c) cut into chunks, chunk 0 its head.  Written in the
-- training's own transaction, so that it is replicated and survives a
-- restart: a standby's first reader, or a server's after a restart, copies
-- it into shared memory instead of reading the item table and computing
-- YᵀY and the index again.  One version per item table; read and written
-- by wals alone; not dumped (a restored model's first reader builds).
CREATE TABLE @extschema@.wals_serving_images (
	item_table oid NOT NULL,
	version bigint NOT NULL,
	chunk int NOT NULL,
	data bytea NOT NULL,
	PRIMARY KEY (item_table, version, chunk)
);
ALTER TABLE @extschema@.wals_serving_images ALTER data SET STORAGE EXTERNAL;
REVOKE ALL ON @extschema@.wals_serving_images FROM PUBLIC;

DROP FUNCTION @extschema@.wals_train(regclass, name, name, name, text, int, int, real, text, real,
	real, text, int, text, int, int, bool, real, text, int, real, real, real, int, text, regclass,
	bool);

CREATE FUNCTION @extschema@.wals_train(
	source regclass,
	user_col name,
	item_col name,
	rating_col name DEFAULT NULL,
	model text DEFAULT NULL,
	factors int DEFAULT 64,
	iterations int DEFAULT 15,
	regularization real DEFAULT 0.1,
	feedback text DEFAULT 'implicit',
	alpha real DEFAULT 1.0,
	unobserved_weight real DEFAULT NULL,
	solver text DEFAULT 'cg',
	cg_steps int DEFAULT 3,
	device text DEFAULT NULL,
	workers int DEFAULT NULL,
	seed int DEFAULT 42,
	warm_start bool DEFAULT false,
	tolerance real DEFAULT NULL,
	accelerate text DEFAULT 'none',
	block_size int DEFAULT NULL,
	regularization_exponent real DEFAULT NULL,
	init_std real DEFAULT NULL,
	validation real DEFAULT NULL,
	patience int DEFAULT NULL,
	validation_metric text DEFAULT NULL,
	validation_table regclass DEFAULT NULL,
	replace bool DEFAULT false,
	changed_col name DEFAULT NULL)
RETURNS SETOF @extschema@.wals_train_result
AS 'MODULE_PATHNAME', 'wals_train'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE ROWS 1;

-- Solve some items again from their current ratings in the source, against
-- the current user factors, and store their factors in place.
CREATE FUNCTION @extschema@.wals_refresh_items(
	item_ids bigint[],
	model text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'wals_refresh_items'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;

CREATE TYPE @extschema@.wals_refresh_result AS (
	model text,
	ratings bigint,
	users bigint,
	new_users bigint,
	items bigint,
	new_items bigint,
	mark text,
	refresh_s float8
);

-- Take in the ratings of the source changed since the model's mark.
CREATE FUNCTION @extschema@.wals_refresh(
	model text DEFAULT NULL,
	solve_items text DEFAULT 'changed')
RETURNS SETOF @extschema@.wals_refresh_result
AS 'MODULE_PATHNAME', 'wals_refresh'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE ROWS 1;

-- wals_tune says which trial the model was trained with: chosen, in its
-- result and in wals_tuning_log (false for the tunings before 0.7.0,
-- whose choice was the best value of the metric).  It tunes explicit
-- ratings too (feedback), judged by default by the RMSE of the held-out
-- ratings (metric NULL: 'rmse' for explicit feedback, 'ndcg@20' for
-- implicit).
ALTER TABLE @extschema@.wals_tuning_log ADD COLUMN chosen bool NOT NULL DEFAULT false;

DROP FUNCTION @extschema@.wals_tune(regclass, name, name, name, text, text, real, interval, jsonb,
	int, int);

CREATE FUNCTION @extschema@.wals_tune(
	source regclass,
	user_col name,
	item_col name,
	rating_col name DEFAULT NULL,
	model text DEFAULT NULL,
	metric text DEFAULT NULL,
	validation real DEFAULT 0.1,
	budget interval DEFAULT '10 minutes',
	space jsonb DEFAULT NULL,
	seed int DEFAULT 42,
	max_trials int DEFAULT NULL,
	feedback text DEFAULT 'implicit')
RETURNS TABLE(trial int, parameters jsonb, score float8, iterations int, seconds float8,
	chosen bool)
AS 'MODULE_PATHNAME', 'wals_tune'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;

-- The trainings, tunings and refreshes under way, one row for each backend
-- (work_progress.c): pid and database to everyone, the rest to members of
-- the role that runs the work and of pg_read_all_stats, as
-- pg_stat_progress_* show theirs.
CREATE FUNCTION @extschema@.wals_progress_rows(
	OUT pid int,
	OUT datid oid,
	OUT command text,
	OUT model text,
	OUT phase text,
	OUT iteration int,
	OUT iterations int,
	OUT rows_done bigint,
	OUT rows_total bigint,
	OUT trial int,
	OUT trials int,
	OUT budget_s float8,
	OUT budget_used float8,
	OUT elapsed_s float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'wals_progress_rows'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE VIEW @extschema@.wals_progress AS
	SELECT p.pid, p.datid, d.datname, p.command, p.model, p.phase, p.iteration, p.iterations,
		p.rows_done, p.rows_total, p.trial, p.trials, p.budget_s, p.budget_used, p.elapsed_s
	FROM @extschema@.wals_progress_rows() p
		LEFT JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) p.datid;
GRANT SELECT ON @extschema@.wals_progress TO PUBLIC;

-- wals_tune committing after each trial (tune.c): the ratings read once,
-- each trial in a transaction and a snapshot of its own, so that VACUUM's
-- horizon moves during a long tuning.  Only where CALL is a statement of
-- its own; the final training and its chosen trial commit together.
CREATE PROCEDURE @extschema@.wals_tune_concurrently(
	source regclass,
	user_col name,
	item_col name,
	rating_col name DEFAULT NULL,
	model text DEFAULT NULL,
	metric text DEFAULT NULL,
	validation real DEFAULT 0.1,
	budget interval DEFAULT '10 minutes',
	space jsonb DEFAULT NULL,
	seed int DEFAULT 42,
	max_trials int DEFAULT NULL,
	feedback text DEFAULT 'implicit',
	INOUT tuning bigint DEFAULT NULL,
	INOUT chosen_trial int DEFAULT NULL,
	INOUT score float8 DEFAULT NULL)
AS 'MODULE_PATHNAME', 'wals_tune_concurrently'
LANGUAGE C;
