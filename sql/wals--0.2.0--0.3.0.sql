-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION wals UPDATE TO '0.3.0'" to load this file. \quit

-- 0.3.0: safe in a database that many roles share.
--
-- * The catalog is written by wals's own code alone, as the extension's
--   owner, after the code has checked the caller's rights; every role may
--   still read it.
-- * Models live in schemas, like tables: (schema, model) is the key, and
--   existing models move into the schema of their factor tables.
-- * Relations are kept as regclass (by OID), never as text.
-- * Each user's rated items are kept in the user factor table, so serving
--   never reads the source; wals_rated_items shows them.
--
-- Rows of the 0.2.0 catalog could be written by any role; each is checked
-- here against the relations it names, and a row that does not describe
-- tables its trainer owns is removed (with a WARNING), its tables left as
-- they are.

-- The items a model keeps as rated by a user, which serving leaves out.
CREATE FUNCTION wals_rated_items(
	user_id bigint,
	model text DEFAULT NULL)
RETURNS TABLE(item_id bigint, rating real)
AS 'MODULE_PATHNAME', 'wals_rated_items'
LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED ROWS 100;

REVOKE INSERT, UPDATE, DELETE ON wals_models, wals_training_log FROM PUBLIC;
REVOKE USAGE ON SEQUENCE wals_model_version_seq FROM PUBLIC;
DROP POLICY wals_training_log_write ON wals_training_log;
DROP POLICY wals_training_log_read ON wals_training_log;
DROP POLICY wals_models_write ON wals_models;
DROP POLICY wals_models_read ON wals_models;
ALTER TABLE wals_models DISABLE ROW LEVEL SECURITY;
ALTER TABLE wals_training_log DISABLE ROW LEVEL SECURITY;

ALTER TABLE wals_training_log DROP CONSTRAINT wals_training_log_pkey;
ALTER TABLE wals_models DROP CONSTRAINT wals_models_pkey;
ALTER TABLE wals_models RENAME COLUMN name TO model;
ALTER TABLE wals_models RENAME COLUMN source TO source_text;
ALTER TABLE wals_models RENAME COLUMN user_factors TO user_factors_name;
ALTER TABLE wals_models RENAME COLUMN item_factors TO item_factors_name;
ALTER TABLE wals_models
	ADD COLUMN schema name,
	ADD COLUMN source regclass,
	ADD COLUMN user_factors regclass,
	ADD COLUMN item_factors regclass;
ALTER TABLE wals_training_log ADD COLUMN schema name;

-- Filled below for each model kept: the rated items of its users.  Only
-- this script calls them; they are dropped at the end.
CREATE FUNCTION wals_upgrade_keep_rated(schema name, model text, fill bool)
RETURNS void
AS 'MODULE_PATHNAME', 'wals_upgrade_keep_rated'
LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION wals_upgrade_pack_rated(items bigint[], ratings real[])
RETURNS bytea
AS 'MODULE_PATHNAME', 'wals_upgrade_pack_rated'
LANGUAGE C IMMUTABLE STRICT;

DO $upgrade$
DECLARE
	m record;
	ut oid;
	it oid;
	owner oid;
	src regclass;
	why text;
BEGIN
	FOR m IN SELECT * FROM @extschema@.wals_models ORDER BY model LOOP
		why := NULL;
		SELECT c.oid, c.relowner INTO ut, owner
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
		WHERE n.nspname OPERATOR(pg_catalog.=) m.factor_schema
		  AND c.relname OPERATOR(pg_catalog.=) m.user_factors_name AND c.relkind OPERATOR(pg_catalog.=) 'r';
		SELECT c.oid INTO it
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
		WHERE n.nspname OPERATOR(pg_catalog.=) m.factor_schema
		  AND c.relname OPERATOR(pg_catalog.=) m.item_factors_name AND c.relkind OPERATOR(pg_catalog.=) 'r'
		  AND c.relowner OPERATOR(pg_catalog.=) owner;
		IF ut IS NULL OR it IS NULL THEN
			why := 'its factor tables are missing or have different owners';
		ELSIF m.user_factors_name OPERATOR(pg_catalog.<>) (m.model OPERATOR(pg_catalog.||) '_user_factors')
		   OR m.item_factors_name OPERATOR(pg_catalog.<>) (m.model OPERATOR(pg_catalog.||) '_item_factors') THEN
			why := 'its factor tables are not named after it';
		ELSIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) m.trained_by)
		   OR NOT pg_catalog.pg_has_role(m.trained_by, owner, 'MEMBER') THEN
			why := 'its factor tables belong to a role its trainer is not a member of';
		ELSIF (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a
			   WHERE a.attrelid OPERATOR(pg_catalog.=) ut AND NOT a.attisdropped
				 AND ((a.attname OPERATOR(pg_catalog.=) 'user_id' AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype)
				   OR (a.attname OPERATOR(pg_catalog.=) 'factors' AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog._float4'::pg_catalog.regtype)))
			  OPERATOR(pg_catalog.<>) 2 THEN
			why := 'its user factor table is not in the form wals wrote';
		END IF;
		IF why IS NOT NULL THEN
			RAISE WARNING 'model "%" was removed from the catalog: %', m.model, why
				USING HINT = 'No table was changed or dropped. Train the model again.';
			DELETE FROM @extschema@.wals_training_log l WHERE l.model OPERATOR(pg_catalog.=) m.model;
			DELETE FROM @extschema@.wals_models x WHERE x.model OPERATOR(pg_catalog.=) m.model;
			CONTINUE;
		END IF;

		BEGIN
			src := pg_catalog.to_regclass(m.source_text);
		EXCEPTION WHEN OTHERS THEN
			src := NULL;
		END;
		UPDATE @extschema@.wals_models x
		SET schema = m.factor_schema, source = src, user_factors = ut, item_factors = it
		WHERE x.model OPERATOR(pg_catalog.=) m.model;
		UPDATE @extschema@.wals_training_log l SET schema = m.factor_schema
		WHERE l.model OPERATOR(pg_catalog.=) m.model;

		BEGIN
			PERFORM @extschema@.wals_upgrade_keep_rated(m.factor_schema, m.model, true);
		EXCEPTION WHEN OTHERS THEN
			RAISE WARNING 'the rated items of model "%.%" could not be read from its source: %',
				m.factor_schema, m.model, SQLERRM
				USING HINT = 'Until the model is trained again, or its users refreshed with wals_refresh_users(), exclude_rated leaves nothing out for it.';
			PERFORM @extschema@.wals_upgrade_keep_rated(m.factor_schema, m.model, false);
		END;
	END LOOP;
	DELETE FROM @extschema@.wals_training_log l WHERE l.schema IS NULL;
END
$upgrade$;

DROP FUNCTION wals_upgrade_keep_rated(name, text, bool);
DROP FUNCTION wals_upgrade_pack_rated(bigint[], real[]);

-- Versions are never reused: rows any role could write may have drawn
-- theirs from elsewhere.
SELECT pg_catalog.setval('@extschema@.wals_model_version_seq', m.v)
FROM (SELECT pg_catalog.max(version) AS v FROM @extschema@.wals_models) m,
	 @extschema@.wals_model_version_seq s
WHERE m.v OPERATOR(pg_catalog.>) s.last_value;

ALTER TABLE wals_models
	DROP COLUMN source_text,
	DROP COLUMN factor_schema,
	DROP COLUMN user_factors_name,
	DROP COLUMN item_factors_name,
	ALTER COLUMN schema SET NOT NULL,
	ALTER COLUMN user_factors SET NOT NULL,
	ALTER COLUMN item_factors SET NOT NULL,
	ADD PRIMARY KEY (schema, model);
ALTER TABLE wals_training_log
	ALTER COLUMN schema SET NOT NULL,
	ADD PRIMARY KEY (schema, model, version, iteration);
