/* sql/wals--0.3.0--0.4.0.sql */
\echo Use "ALTER EXTENSION wals UPDATE TO '0.4.0'" to load this file. \quit

-- 0.4.0: fewer and cheaper sweeps.  wals_train takes accelerate ('none' or
-- 'ncg', ALS-NCG) and block_size (the dimensions per block of solver
-- 'subspace', iALS++); the catalog records both, and the training log says
-- of each iteration whether it was a plain ALS sweep or an accelerated step.
-- Frequency-scaled regularization (regularization_exponent) and the
-- starting factors' scale (init_std), NULL for the models before them.
-- Early stopping on a held-out share of the ratings (validation) or on the
-- cells of a table (validation_table), by a ranking metric
-- (validation_metric, ndcg@20 unless given) and patience: the model keeps
-- the best iterate, whose number and validation score the catalog
-- records, with each iteration's in the training log.

ALTER TABLE wals_models
	ADD COLUMN accelerate text NOT NULL DEFAULT 'none',
	ADD COLUMN block_size int,
	ADD COLUMN regularization_exponent real,
	ADD COLUMN init_std real,
	ADD COLUMN validation real,
	ADD COLUMN validation_table text,
	ADD COLUMN validation_metric text,
	ADD COLUMN patience int,
	ADD COLUMN best_iteration int,
	ADD COLUMN validation_score float8;

-- 'als': the iteration kept its ALS sweep; 'ncg': it moved further, along
-- the direction of the nonlinear conjugate gradient.
ALTER TABLE wals_training_log
	ADD COLUMN step text NOT NULL DEFAULT 'als',
	ADD COLUMN validation_score float8;

-- The role that owns each model, recorded at every training: the owner of
-- its factor tables is checked against it, not taken from them.  A model
-- trained before takes the owner of the first of its tables that is still
-- the one wals made for it (an ordinary table in its schema, under the
-- name wals gave it), else the owner of its schema, else (the schema gone
-- too) the extension's owner.
ALTER TABLE wals_models ADD COLUMN owner regrole;
UPDATE wals_models m SET owner = COALESCE(
	(SELECT c.relowner FROM pg_catalog.pg_class c
	 WHERE c.oid OPERATOR(pg_catalog.=) m.user_factors::pg_catalog.oid
	   AND c.relkind OPERATOR(pg_catalog.=) 'r'
	   AND c.relnamespace OPERATOR(pg_catalog.=) (SELECT n.oid FROM pg_catalog.pg_namespace n
	                                               WHERE n.nspname OPERATOR(pg_catalog.=) m.schema)
	   AND c.relname OPERATOR(pg_catalog.=) (m.model OPERATOR(pg_catalog.||) '_user_factors')),
	(SELECT c.relowner FROM pg_catalog.pg_class c
	 WHERE c.oid OPERATOR(pg_catalog.=) m.item_factors::pg_catalog.oid
	   AND c.relkind OPERATOR(pg_catalog.=) 'r'
	   AND c.relnamespace OPERATOR(pg_catalog.=) (SELECT n.oid FROM pg_catalog.pg_namespace n
	                                               WHERE n.nspname OPERATOR(pg_catalog.=) m.schema)
	   AND c.relname OPERATOR(pg_catalog.=) (m.model OPERATOR(pg_catalog.||) '_item_factors')),
	(SELECT n.nspowner FROM pg_catalog.pg_namespace n
	 WHERE n.nspname OPERATOR(pg_catalog.=) m.schema),
	(SELECT e.extowner FROM pg_catalog.pg_extension e
	 WHERE e.extname OPERATOR(pg_catalog.=) 'wals'))::pg_catalog.regrole;
ALTER TABLE wals_models ALTER COLUMN owner SET NOT NULL;

-- A number for each model name a training, refresh or drop ever locked,
-- never reused: the key of that lock, which no two models share.  Not
-- dumped: the numbers matter only to the sessions of one server.  No role
-- but the extension's owner may read or lock its rows.
CREATE TABLE wals_model_locks (
	schema name NOT NULL,
	model text NOT NULL,
	lock_key int GENERATED ALWAYS AS IDENTITY,
	PRIMARY KEY (schema, model)
);
REVOKE ALL ON wals_model_locks FROM PUBLIC;

DROP FUNCTION wals_train(regclass, name, name, name, text, int, int, real, text, real,
						 real, text, int, text, int, int, bool, real);

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
	tolerance real DEFAULT NULL,
	accelerate text DEFAULT 'none',
	block_size int DEFAULT NULL,
	regularization_exponent real DEFAULT NULL,
	init_std real DEFAULT NULL,
	validation real DEFAULT NULL,
	patience int DEFAULT NULL,
	validation_metric text DEFAULT NULL,
	validation_table regclass DEFAULT NULL,
	replace bool DEFAULT false)
RETURNS SETOF wals_train_result
AS 'MODULE_PATHNAME', 'wals_train'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE ROWS 1;

-- wals_tune: a search of training parameters on a validation share held
-- out of the source, each trial a training; every trial of every tuning
-- of a model, kept until the model is dropped.  Written only by wals, as
-- the extension's owner, like the other catalog tables.
CREATE TABLE wals_tuning_log (
	schema name NOT NULL,
	model text NOT NULL,
	tuning bigint NOT NULL,
	trial int NOT NULL,
	parameters jsonb NOT NULL,
	metric text NOT NULL,
	value float8,
	iterations int,
	seconds float8,
	tuned_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (schema, model, tuning, trial)
);
SELECT pg_catalog.pg_extension_config_dump('wals_tuning_log', '');
GRANT SELECT ON wals_tuning_log TO PUBLIC;

CREATE FUNCTION wals_tune(
	source regclass,
	user_col name,
	item_col name,
	rating_col name DEFAULT NULL,
	model text DEFAULT NULL,
	metric text DEFAULT 'ndcg@20',
	validation real DEFAULT 0.1,
	budget interval DEFAULT '10 minutes',
	space jsonb DEFAULT NULL,
	seed int DEFAULT 42,
	max_trials int DEFAULT NULL)
RETURNS TABLE(trial int, parameters jsonb, score float8, iterations int, seconds float8)
AS 'MODULE_PATHNAME', 'wals_tune'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;

-- Training on the servers of a sharded source (a partitioned table whose
-- partitions are postgres_fdw foreign tables, or a Citus distributed
-- table): wals_shards() shows which servers a training would run on; the
-- wals_shard_* functions are what the coordinator calls on each of them,
-- inside one remote transaction, as the remote role of the caller's user
-- mapping (or as the caller, on Citus's nodes).
CREATE FUNCTION wals_shards(source regclass)
RETURNS TABLE(shard int, server text, partition regclass, remote_table text)
AS 'MODULE_PATHNAME', 'wals_shards'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL SAFE;

CREATE FUNCTION wals_shard_load(source text, user_col text, item_col text, rating_col text,
								feedback text)
RETURNS bigint AS 'MODULE_PATHNAME', 'wals_shard_load'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_ids() RETURNS bytea AS 'MODULE_PATHNAME', 'wals_shard_ids'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_id_page(side int, first bigint, count bigint) RETURNS bytea
AS 'MODULE_PATHNAME', 'wals_shard_id_page'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_plan(params bytea, shard int, nshards int, nusers bigint,
								nitems bigint)
RETURNS void AS 'MODULE_PATHNAME', 'wals_shard_plan'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_plan_page(side int, page bytea) RETURNS void
AS 'MODULE_PATHNAME', 'wals_shard_plan_page'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_route() RETURNS void AS 'MODULE_PATHNAME', 'wals_shard_route'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_outbox(target int, max_cells bigint) RETURNS bytea
AS 'MODULE_PATHNAME', 'wals_shard_outbox'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_inbox(cells bytea) RETURNS void
AS 'MODULE_PATHNAME', 'wals_shard_inbox'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_start() RETURNS bigint AS 'MODULE_PATHNAME', 'wals_shard_start'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_put(side int, shard int, first bigint, rows bytea) RETURNS void
AS 'MODULE_PATHNAME', 'wals_shard_put'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_solve(side int, doing text, gram bytea, max_bytes bigint)
RETURNS bytea
AS 'MODULE_PATHNAME', 'wals_shard_solve'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_take(side int, first bigint, count bigint) RETURNS bytea
AS 'MODULE_PATHNAME', 'wals_shard_take'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_loss() RETURNS float8 AS 'MODULE_PATHNAME', 'wals_shard_loss'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_rated(first bigint, max_bytes bigint) RETURNS bytea
AS 'MODULE_PATHNAME', 'wals_shard_rated'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION wals_shard_end() RETURNS bigint AS 'MODULE_PATHNAME', 'wals_shard_end'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The shard functions read partitions for a coordinator and hold the
-- memory of its training between its calls: they are for the roles a DBA
-- makes peers of sharded trainings, not for every role of the database.
-- EXECUTE is granted to those roles (README, "Training on sharded data").
REVOKE EXECUTE ON FUNCTION wals_shard_load(text, text, text, text, text), wals_shard_ids(),
	wals_shard_id_page(int, bigint, bigint), wals_shard_plan(bytea, int, int, bigint, bigint),
	wals_shard_plan_page(int, bytea), wals_shard_route(), wals_shard_outbox(int, bigint),
	wals_shard_inbox(bytea), wals_shard_start(), wals_shard_put(int, int, bigint, bytea),
	wals_shard_solve(int, text, bytea, bigint), wals_shard_take(int, bigint, bigint),
	wals_shard_loss(), wals_shard_rated(bigint, bigint), wals_shard_end()
	FROM PUBLIC;

-- wals_retrain: the model trained again from its recorded source, columns,
-- feedback and settings; NULL keeps a recorded setting, validation => 0
-- drops the recorded validation.
CREATE FUNCTION wals_retrain(
	model text,
	warm_start bool DEFAULT false,
	factors int DEFAULT NULL,
	iterations int DEFAULT NULL,
	regularization real DEFAULT NULL,
	alpha real DEFAULT NULL,
	unobserved_weight real DEFAULT NULL,
	solver text DEFAULT NULL,
	cg_steps int DEFAULT NULL,
	device text DEFAULT NULL,
	workers int DEFAULT NULL,
	seed int DEFAULT NULL,
	tolerance real DEFAULT NULL,
	accelerate text DEFAULT NULL,
	block_size int DEFAULT NULL,
	regularization_exponent real DEFAULT NULL,
	init_std real DEFAULT NULL,
	validation real DEFAULT NULL,
	patience int DEFAULT NULL,
	validation_metric text DEFAULT NULL,
	validation_table regclass DEFAULT NULL)
RETURNS SETOF wals_train_result
AS 'MODULE_PATHNAME', 'wals_retrain'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE ROWS 1;

-- A dump of one schema (pg_dump -n) or of some tables (-t) holds a model's
-- factor tables but not its catalog row, which is dumped with the whole
-- database only.  Every training describes the model's settings in the
-- comment on column "factors" of its user factor table, which such a dump
-- keeps; wals_attach_model makes a model again of the factor tables found
-- without a catalog row, from that description, after checking the
-- caller's rights, the tables and every value of the description.
CREATE FUNCTION wals_attach_model(model text)
RETURNS void
AS 'MODULE_PATHNAME', 'wals_attach_model'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;

-- Dropping wals drops its models, or is refused while there are any: a
-- model's factor tables are tables of its owner that nothing in pg_depend
-- ties to the extension, so DROP EXTENSION wals would leave them behind
-- with no catalog.  At the start of each command that may drop wals, the
-- trigger refuses DROP EXTENSION wals while a model holds a factor table
-- (2BP01), drops the models' tables first under DROP EXTENSION wals
-- CASCADE, and refuses DROP SCHEMA ... CASCADE of wals's schema and DROP
-- OWNED BY its owner, which would drop the extension without naming it
-- (src/catalog/uninstall.c).  A command that does not drop wals, or that
-- the role may not run, goes on untouched.
CREATE FUNCTION wals_uninstall() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'wals_uninstall'
LANGUAGE C;
REVOKE EXECUTE ON FUNCTION wals_uninstall() FROM PUBLIC;
CREATE EVENT TRIGGER wals_uninstall ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA', 'DROP OWNED')
	EXECUTE FUNCTION wals_uninstall();
