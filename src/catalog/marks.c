/*
 * marks.c
 *	  The column of a source that says when each rating last changed, and
 *	  the mark: the highest value of it a training or a refresh took in.
 *
 * wals_refresh reads the ratings above the mark.  The mark is kept in the
 * catalog as text, so that any of the column's types fits one column, and
 * so that a DBA reads it as written; it is written by the type's output
 * function and read back by its input function with DateStyle and
 * TimeZone pinned (ISO, UTC), so that it means the same value whatever the
 * settings of the session that wrote it and of the one that reads it.
 *
 * The mark is the highest value in the snapshot the ratings are read in,
 * so that what a training or refresh took in and what its mark says are
 * the same rows.  What no mark can see is a rating committed after a refresh with a value below
 * the mark it set: a transaction that stamped its rows and committed late
 * (doc/training.md says how to keep the column in commit order).
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "wals_catalog.h"

/* The base types a changed column may have: ordered, and compared exactly. */
static bool
mark_type_ok(Oid type)
{
	switch (type)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return true;
		default:
			return false;
	}
}

/*
 * Check that name, given as "changed_col", is a column of relid (shown as
 * reldisplay) that a mark can be taken of; returns its name.
 */
char *
wals_check_changed_col(Oid relid, const char *reldisplay, const char *name)
{
	AttrNumber	attnum = get_attnum(relid, name);
	Oid			type;

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" given as \"changed_col\" does not exist in relation \"%s\"",
						name, reldisplay)));
	type = getBaseType(get_atttype(relid, attnum));
	if (!mark_type_ok(type))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" given as \"changed_col\" has type %s", name,
						format_type_be(type)),
				 errhint("\"changed_col\" must name a column of type timestamp with or without time zone, date, smallint, integer, bigint or numeric that grows when a rating changes.")));
	return get_attname(relid, attnum, false);
}

/* The base type of column col of relid, checked again: it may have changed. */
Oid
wals_changed_col_type(Oid relid, const char *col, const char *display)
{
	AttrNumber	attnum = get_attnum(relid, col);
	Oid			type = attnum > 0 ? getBaseType(get_atttype(relid, attnum)) : InvalidOid;

	if (!mark_type_ok(type))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the changed column \"%s\" of the source of model \"%s\" is gone or no longer has a type wals can mark",
						col, display),
				 errhint("Train the model again with wals_train(..., changed_col => ...).")));
	return type;
}

/* Pin the settings a mark's text depends on; returns the level to undo. */
static int
pin_settings(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("datestyle", "ISO, YMD", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("timezone", "UTC", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/* The text of value, of type, as the catalog keeps a mark. */
char *
wals_mark_text(Datum value, Oid type)
{
	Oid			out;
	bool		varlena;
	int			level = pin_settings();
	char	   *text;

	getTypeOutputInfo(type, &out, &varlena);
	text = OidOutputFunctionCall(out, value);
	AtEOXact_GUC(true, level);
	return text;
}

static void
mark_context(void *arg)
{
	errcontext("reading the mark of model \"%s\"", (const char *) arg);
}

/*
 * The value of type a mark's text names.  The text is the catalog's, which
 * wals wrote but a superuser may have edited: an error of the type's input
 * says whose mark it read.
 */
Datum
wals_mark_value(const char *text, Oid type, const char *display)
{
	Oid			in;
	Oid			ioparam;
	int			level = pin_settings();
	Datum		value;
	ErrorContextCallback callback = {error_context_stack, mark_context, unconstify(char *, display)};

	getTypeInputInfo(type, &in, &ioparam);
	error_context_stack = &callback;
	value = OidInputFunctionCall(in, unconstify(char *, text), ioparam, -1);
	error_context_stack = callback.previous;
	AtEOXact_GUC(true, level);
	return value;
}

/*
 * The highest value of col in source (a quoted, qualified name) in the
 * active snapshot, the one the ratings are read in, as a Datum of its base
 * type; false when every value is NULL.  Read with the rights of the role
 * the caller has become.
 */
bool
wals_mark_read(const char *source, const char *col, Oid type, Datum *value)
{
	bool		isnull;
	MemoryContext cxt = CurrentMemoryContext;

	if (wals_sql(psprintf("SELECT pg_catalog.max(%s::%s) FROM %s", quote_identifier(col),
						  format_type_be_qualified(type), source),
				 0, NULL, NULL, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "wals: could not read the highest \"%s\" of %s", col, source);
	*value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		int16		len;
		bool		byval;

		get_typlenbyval(type, &len, &byval);
		MemoryContextSwitchTo(cxt);
		*value = datumCopy(*value, byval, len);
	}
	return !isnull;
}

/* Whether some index of relid starts with column col. */
static bool
index_leads_with(Oid relid, const char *col)
{
	Oid			types[2] = {OIDOID, INT2OID};
	Datum		args[2];
	bool		isnull;

	args[0] = ObjectIdGetDatum(relid);
	args[1] = Int16GetDatum(get_attnum(relid, col));
	if (wals_sql("SELECT EXISTS (SELECT FROM pg_catalog.pg_index"
				 " WHERE indrelid OPERATOR(pg_catalog.=) $1"
				 " AND indkey[0] OPERATOR(pg_catalog.=) $2)",
				 2, types, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "wals: could not read the indexes of relation %u", relid);
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Say, when a table source lacks them, which indexes make wals_refresh
 * cheap: one on the changed column (the rows above the mark) and one that
 * starts with the user column (the pairs read again).  A view's are its
 * tables', which are not looked into.
 */
void
wals_changed_col_advice(Oid source, const char *source_name, const char *col,
						const char *user_col, const char *item_col)
{
	char		kind = get_rel_relkind(source);

	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		return;
	if (!index_leads_with(source, col))
		ereport(NOTICE,
				(errmsg("no index of \"%s\" starts with its changed column \"%s\"",
						source_name, col),
				 errdetail("wals_refresh reads the ratings above the mark; without an index it reads the whole table."),
				 errhint("CREATE INDEX ON %s (%s);", source_name, quote_identifier(col))));
	if (!index_leads_with(source, user_col))
		ereport(NOTICE,
				(errmsg("no index of \"%s\" starts with its user column \"%s\"",
						source_name, user_col),
				 errdetail("wals_refresh reads every row of the (user, item) pairs that changed again; without an index it reads the whole table."),
				 errhint("CREATE INDEX ON %s (%s, %s);", source_name, quote_identifier(user_col),
						 quote_identifier(item_col))));
}
