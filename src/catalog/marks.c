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
