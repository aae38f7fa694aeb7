-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION wals" to load this file. \quit

-- Every training draws its model version here, so a version is never
-- reused, even after a drop: serving caches compare versions only.
CREATE SEQUENCE wals_model_version_seq;

-- One row per model.
CREATE TABLE wals_models (
	name text PRIMARY KEY,
	source text NOT NULL,
	user_col name NOT NULL,
	item_col name NOT NULL,
	rating_col name,
	feedback text NOT NULL,
	factors int NOT NULL,
	iterations int NOT NULL,
	max_iterations int NOT NULL,
	regularization real NOT NULL,
	alpha real NOT NULL,
	unobserved_weight real NOT NULL,
	solver text NOT NULL,
	cg_steps int NOT NULL,
	seed int NOT NULL,
	tolerance real,
	warm_start bool NOT NULL,
	users bigint NOT NULL,
	items bigint NOT NULL,
	ratings bigint NOT NULL,
	loss float8 NOT NULL,
	device text NOT NULL,
	workers int NOT NULL,
	load_s float8 NOT NULL,
	train_s float8 NOT NULL,
	store_s float8 NOT NULL,
	total_s float8 NOT NULL,
	trained_at timestamptz NOT NULL,
	trained_by name NOT NULL,
	version bigint NOT NULL,
	factor_schema name NOT NULL,
	user_factors name NOT NULL,
	item_factors name NOT NULL
);

-- The loss and time of every iteration of every training.
CREATE TABLE wals_training_log (
	model text NOT NULL,
	version bigint NOT NULL,
	iteration int NOT NULL,
	loss float8 NOT NULL,
	seconds float8 NOT NULL,
	PRIMARY KEY (model, version, iteration)
);

-- pg_dump keeps models: the catalog, the log and the version counter.
SELECT pg_catalog.pg_extension_config_dump('wals_models', '');
SELECT pg_catalog.pg_extension_config_dump('wals_training_log', '');
SELECT pg_catalog.pg_extension_config_dump('wals_model_version_seq', '');

-- Any role may train and serve its own models; a role changes only the
-- catalog rows of models trained by a role it belongs to.
GRANT SELECT, INSERT, UPDATE, DELETE ON wals_models, wals_training_log TO PUBLIC;
GRANT USAGE ON SEQUENCE wals_model_version_seq TO PUBLIC;
ALTER TABLE wals_models ENABLE ROW LEVEL SECURITY;
ALTER TABLE wals_training_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY wals_models_read ON wals_models FOR SELECT USING (true);
CREATE POLICY wals_models_write ON wals_models FOR ALL
	USING (pg_catalog.pg_has_role(trained_by, 'MEMBER'))
	WITH CHECK (trained_by OPERATOR(pg_catalog.=) CURRENT_USER);
CREATE POLICY wals_training_log_read ON wals_training_log FOR SELECT USING (true);
CREATE POLICY wals_training_log_write ON wals_training_log FOR ALL
	USING (EXISTS (SELECT 1 FROM @extschema@.wals_models m
				   WHERE m.name OPERATOR(pg_catalog.=) model
				   AND pg_catalog.pg_has_role(m.trained_by, 'MEMBER')))
	WITH CHECK (EXISTS (SELECT 1 FROM @extschema@.wals_models m
						WHERE m.name OPERATOR(pg_catalog.=) model
						AND m.trained_by OPERATOR(pg_catalog.=) CURRENT_USER));

-- The summary row of a training.  A named type rather than RETURNS TABLE,
-- because its column names repeat argument names of wals_train.
CREATE TYPE wals_train_result AS (
	model text,
	users bigint,
	items bigint,
	ratings bigint,
	factors int,
	iterations int,
	loss float8,
	device text,
	load_s float8,
	train_s float8,
	store_s float8,
	total_s float8
);

CREATE FUNCTION wals_train(
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
	tolerance real DEFAULT NULL)
RETURNS SETOF wals_train_result
AS 'MODULE_PATHNAME', 'wals_train'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION wals_recommend(
	user_id bigint,
	k int DEFAULT 10,
	model text DEFAULT NULL,
	exclude_rated bool DEFAULT true)
RETURNS TABLE(item_id bigint, score real)
AS 'MODULE_PATHNAME', 'wals_recommend'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED ROWS 10;

CREATE FUNCTION wals_predict(
	user_id bigint,
	item_id bigint,
	model text DEFAULT NULL)
RETURNS real
AS 'MODULE_PATHNAME', 'wals_predict'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED;

CREATE FUNCTION wals_drop_model(model text)
RETURNS void
AS 'MODULE_PATHNAME', 'wals_drop_model'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;

-- The devices wals can train on: the CPU with its BLAS and vector kernels,
-- then each GPU, or one row saying why no GPU is usable.
CREATE FUNCTION wals_devices(
	OUT device text,
	OUT usable bool,
	OUT name text,
	OUT memory_total bigint,
	OUT memory_free bigint,
	OUT compute_capability text,
	OUT driver_version text,
	OUT runtime_version text,
	OUT blas text,
	OUT threads int,
	OUT kernels text,
	OUT reason text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'wals_devices'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
