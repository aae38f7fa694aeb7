/* sql/wals--0.5.0--0.6.0.sql */
\echo Use "ALTER EXTENSION wals UPDATE TO '0.6.0'" to load this file. \quit

-- 0.6.0: the validation table of a model kept by OID, as its source and
-- factor tables are.  0.4.0 and 0.5.0 recorded wals_models.validation_table
-- as text, the relation's name alone (unqualified and unquoted, whatever
-- schema it was in), and wals_retrain looked that name up along the
-- search_path of whoever retrained: a superuser's retraining of a tenant's
-- model validated on public.vt, not on the tenant's vt.  The column becomes
-- a regclass, and validation_owner records the role the relation belonged
-- to when a training read it: wals_retrain uses the relation by OID, and
-- only while it still belongs to that role (a dump and restore keeps the
-- number of a relation dropped before the dump, which may then name
-- another role's).
--
-- Each name recorded is resolved here once, without the search_path of
-- the role that runs the update, which says nothing of where the trainer's
-- table was:
--
-- * a schema-qualified name (as regclass's output writes a relation not
--   visible on the path, which a row written by hand may hold) means that
--   relation exactly;
-- * a name alone is looked for as wals wrote it, then as an identifier
--   (quoted, as regclass's output quotes one), first in the model's schema
--   (where the training that named it put the model: for a model named
--   without a schema, the first schema of the same search_path its
--   validation table was looked up on), then in its source's schema (held-
--   out cells are kept beside the ratings they come from); and it is taken
--   only where it belongs to the model's owner or to the source's owner,
--   whose relations a training of the model read: a relation of another
--   role under that name may be anyone's, made after the one recorded was
--   dropped;
-- * only a table or view with the model's user and item columns is taken,
--   and never one of pg_catalog, information_schema or another system or
--   temporary schema.
--
-- A name that resolves to no relation becomes NULL, with a WARNING naming
-- the model and saying how to give the table again (a WARNING: ALTER
-- EXTENSION raises client_min_messages to WARNING while it runs a script,
-- so a NOTICE would reach no one); the model keeps its validation metric,
-- and wals_retrain refuses it until a validation table (or validation =>
-- 0) is given.  Nothing here runs a role's code: only the system catalogs
-- are read.

CREATE FUNCTION wals_upgrade_validation_table(model_schema name, model_name text,
											  source_rel regclass, model_owner regrole,
											  user_column text, item_column text,
											  recorded text)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
	parts pg_catalog.text[];
	names pg_catalog.text[];
	schemas pg_catalog.oid[];
	owners pg_catalog.oid[];
	nm pg_catalog.text;
	nsp pg_catalog.oid;
	relid pg_catalog.oid;
	where_looked pg_catalog.text;
BEGIN
	IF recorded IS NULL THEN
		RETURN NULL;
	END IF;
	BEGIN
		parts := pg_catalog.parse_ident(recorded, true);
	EXCEPTION WHEN OTHERS THEN
		parts := NULL;
	END;

	IF pg_catalog.cardinality(parts) OPERATOR(pg_catalog.=) 2
	   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
					   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
					   WHERE n.nspname OPERATOR(pg_catalog.=) model_schema
						 AND c.relname OPERATOR(pg_catalog.=) recorded) THEN
		-- schema-qualified: that relation, and no other
		SELECT c.oid INTO relid
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
		WHERE n.nspname OPERATOR(pg_catalog.=) parts[1]
		  AND c.relname OPERATOR(pg_catalog.=) parts[2]
		  AND n.nspname OPERATOR(pg_catalog.<>) 'information_schema'
		  AND n.nspname OPERATOR(pg_catalog.!~~) 'pg\_%'
		  AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,v,m,f,p}'::pg_catalog."char"[])
		  AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a
			   WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid AND a.attnum OPERATOR(pg_catalog.>) 0
				 AND NOT a.attisdropped
				 AND a.attname OPERATOR(pg_catalog.=) ANY (ARRAY[user_column, item_column]::pg_catalog.name[]))
			  OPERATOR(pg_catalog.=) 2;
		where_looked := pg_catalog.format('no table or view %s with columns %s and %s exists',
										  pg_catalog.quote_ident(parts[1]) OPERATOR(pg_catalog.||) '.'
										  OPERATOR(pg_catalog.||) pg_catalog.quote_ident(parts[2]),
										  pg_catalog.quote_ident(user_column),
										  pg_catalog.quote_ident(item_column));
	ELSE
		-- a name alone: as written, then as an identifier
		names := ARRAY[recorded];
		IF pg_catalog.cardinality(parts) OPERATOR(pg_catalog.=) 1
		   AND parts[1] OPERATOR(pg_catalog.<>) recorded THEN
			names := names OPERATOR(pg_catalog.||) parts[1];
		END IF;
		schemas := ARRAY[(SELECT n.oid FROM pg_catalog.pg_namespace n
						  WHERE n.nspname OPERATOR(pg_catalog.=) model_schema),
						 (SELECT c.relnamespace FROM pg_catalog.pg_class c
						  WHERE c.oid OPERATOR(pg_catalog.=) source_rel::pg_catalog.oid)];
		owners := ARRAY[model_owner::pg_catalog.oid,
						(SELECT c.relowner FROM pg_catalog.pg_class c
						 WHERE c.oid OPERATOR(pg_catalog.=) source_rel::pg_catalog.oid)];
		<<lookup>>
		FOREACH nm IN ARRAY names LOOP
			FOREACH nsp IN ARRAY schemas LOOP
				SELECT c.oid INTO relid
				FROM pg_catalog.pg_class c
				JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
				WHERE c.relnamespace OPERATOR(pg_catalog.=) nsp
				  AND c.relname OPERATOR(pg_catalog.=) nm
				  AND n.nspname OPERATOR(pg_catalog.<>) 'information_schema'
				  AND n.nspname OPERATOR(pg_catalog.!~~) 'pg\_%'
				  AND c.relowner OPERATOR(pg_catalog.=) ANY (owners)
				  AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,v,m,f,p}'::pg_catalog."char"[])
				  AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a
					   WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid
						 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
						 AND a.attname OPERATOR(pg_catalog.=) ANY (ARRAY[user_column, item_column]::pg_catalog.name[]))
					  OPERATOR(pg_catalog.=) 2;
				EXIT lookup WHEN relid IS NOT NULL;
			END LOOP;
		END LOOP;
		where_looked := pg_catalog.format(
			'no table or view of that name with columns %s and %s, of the model''s owner or its source''s, is in schema %s (the model''s)%s',
			pg_catalog.quote_ident(user_column), pg_catalog.quote_ident(item_column),
			pg_catalog.quote_ident(model_schema),
			COALESCE((SELECT ' or ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(n.nspname)
					  OPERATOR(pg_catalog.||) ' (its source''s)'
					  FROM pg_catalog.pg_namespace n
					  WHERE n.oid OPERATOR(pg_catalog.=) schemas[2]
						AND n.nspname OPERATOR(pg_catalog.<>) model_schema), ''));
	END IF;

	IF relid IS NULL THEN
		RAISE WARNING 'the validation table "%" of model "%.%" could not be resolved, and is no longer recorded',
			recorded, model_schema, model_name
			USING DETAIL = pg_catalog.format('wals 0.4.0 and 0.5.0 recorded a validation table by its name alone; %s.', where_looked),
				  HINT = pg_catalog.format('Give it again with SELECT wals_retrain(%L, validation_table => ...), or retrain with validation => 0 to train without one; until then wals_retrain refuses the model.',
										   pg_catalog.quote_ident(model_schema) OPERATOR(pg_catalog.||) '.'
										   OPERATOR(pg_catalog.||) pg_catalog.quote_ident(model_name));
	END IF;
	RETURN relid;
END
$fn$;

ALTER TABLE @extschema@.wals_models
	ALTER COLUMN validation_table TYPE regclass
	USING @extschema@.wals_upgrade_validation_table(schema, model, source, owner, user_col,
												   item_col, validation_table),
	ADD COLUMN validation_owner regrole;
UPDATE @extschema@.wals_models m
SET validation_owner = c.relowner::pg_catalog.regrole
FROM pg_catalog.pg_class c
WHERE c.oid OPERATOR(pg_catalog.=) m.validation_table::pg_catalog.oid;

DROP FUNCTION @extschema@.wals_upgrade_validation_table(name, text, regclass, regrole, text,
														text, text);
