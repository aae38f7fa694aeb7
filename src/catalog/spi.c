/*
 * spi.c
 *	  The one way wals runs SQL: every statement it builds, whether run
 *	  once, kept as a plan for the life of the backend or read through a
 *	  cursor, goes through these functions, which pin search_path to
 *	  pg_catalog, pg_temp for the duration of the call.
 *
 * wals's texts name their relations by OID and their functions, types and
 * operators in pg_catalog or the extension's schema, but a name left bare
 * by mistake (an operator on an argument of unknown type, say) would
 * otherwise resolve through the caller's search_path, where any role able
 * to create in a schema on it could put a better match and have it run
 * with the caller's rights.  Pinning the path makes such a slip harmless;
 * test/sql_texts.pl refuses the slips themselves and any SPI call made
 * outside this file.  Planning, execution and each fetch of a cursor are
 * all pinned, so that code reached from wals's statements (a view's
 * functions) sees one search_path throughout, as PostgreSQL 17 runs its
 * maintenance commands.  Values travel as parameters, never as text.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "executor/spi.h"
#include "utils/guc.h"

#include "wals_catalog.h"

#define PINNED_PATH "pg_catalog, pg_temp"

/*
 * Returns the GUC nest level to unpin, or -1 when the path is pinned
 * already (inside wals_become, which pins it for all the owner's work):
 * the same string resolves the same names, and serving a user then costs
 * one setting of the path rather than two.
 */
static int
pin(void)
{
	int			level;

	if (namespace_search_path != NULL && strcmp(namespace_search_path, PINNED_PATH) == 0)
		return -1;
	level = NewGUCNestLevel();
	(void) set_config_option("search_path", PINNED_PATH, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/* An error unwinds the setting with the (sub)transaction instead. */
static void
unpin(int level)
{
	if (level >= 0)
		AtEOXact_GUC(true, level);
}

/*
 * Error unless a statement of wals on relid (InvalidOid: on no one table)
 * returned the SPI result it was written for.  A table's owner can make
 * a statement return another (a rule rewrites it: SPI_OK_REWRITTEN, or a
 * DO INSTEAD of another kind), which is the owner's doing, not a fault of
 * wals: 55000, naming the table.
 */
void
wals_sql_expect(int rc, int expected, Oid relid)
{
	char	   *rel;

	if (rc == expected)
		return;
	rel = OidIsValid(relid) ? wals_relation_name(relid) : NULL;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 rel != NULL ?
			 errmsg("a statement of wals on relation %s did not run as written", rel) :
			 errmsg("a statement of wals did not run as written"),
			 errdetail("It returned %s where %s was expected: a rule rewrote it.",
					   SPI_result_code_string(rc), SPI_result_code_string(expected)),
			 rel != NULL ?
			 errhint("Drop the rules on %s: wals reads and writes the relations of a model itself.", rel) :
			 errhint("Drop the rules on the relations of the model: wals reads and writes them itself.")));
}

/*
 * Run a query with parameters (nulls as SPI takes them, NULL for none);
 * returns SPI's result code, an error when it is negative.
 */
int
wals_sql(const char *query, int nargs, const Oid *types, const Datum *values,
		 const char *nulls, bool read_only, long count)
{
	int			level = pin();
	int			rc = SPI_execute_with_args(query, nargs, (Oid *) types, (Datum *) values,
										   nulls, read_only, count);

	unpin(level);
	if (rc < 0)
		elog(ERROR, "wals: query \"%s\" failed: %s", query, SPI_result_code_string(rc));
	return rc;
}

/*
 * Connect to SPI, as every entry point that runs a statement does; an
 * error, never a code to forget to check, where it cannot.
 */
void
wals_spi_connect(void)
{
	int			rc = SPI_connect();

	if (rc != SPI_OK_CONNECT)
		elog(ERROR, "wals: SPI_connect failed: %s", SPI_result_code_string(rc));
}

/* Run a query with parameters, none null; expected is an SPI result or -1. */
void
wals_spi_exec(const char *query, int nargs, const Oid *types,
			  const Datum *values, int expected)
{
	int			rc = wals_sql(query, nargs, types, values, NULL, false, 0);

	if (expected >= 0)
		wals_sql_expect(rc, expected, InvalidOid);
}

/* Run a query with SPI's options (a receiver of its own, a row limit). */
int
wals_sql_extended(const char *query, const SPIExecuteOptions *options)
{
	int			level = pin();
	int			rc = SPI_execute_extended(query, options);

	unpin(level);
	return rc;
}

/* A plan for the current SPI connection, freed with it or by SPI_freeplan. */
SPIPlanPtr
wals_sql_prepare(const char *query, int nargs, Oid *types)
{
	int			level = pin();
	SPIPlanPtr	plan = SPI_prepare(query, nargs, types);

	unpin(level);
	if (plan == NULL)
		elog(ERROR, "wals: could not prepare \"%s\": %s", query, SPI_result_code_string(SPI_result));
	return plan;
}

/* A plan prepared and kept for the life of the backend. */
SPIPlanPtr
wals_keep_plan(const char *query, int nargs, Oid *types)
{
	SPIPlanPtr	plan = wals_sql_prepare(query, nargs, types);

	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "wals: could not keep the plan of \"%s\"", query);
	return plan;
}

/*
 * Run a plan; returns SPI's result code.  A kept plan is planned again
 * when what it reads changes, which happens here, pinned as well.
 */
int
wals_sql_plan(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only,
			  long count)
{
	int			level = pin();
	int			rc = SPI_execute_plan(plan, (Datum *) values, nulls, read_only, count);

	unpin(level);
	return rc;
}

/* A cursor over a query with parameters, read with wals_sql_fetch. */
Portal
wals_sql_cursor(const char *query, int nargs, const Oid *types, const Datum *values,
				const char *nulls, bool read_only, int options)
{
	int			level = pin();
	Portal		portal = SPI_cursor_open_with_args(NULL, query, nargs, (Oid *) types,
												   (Datum *) values, nulls, read_only,
												   options);

	unpin(level);
	if (portal == NULL)
		elog(ERROR, "wals: could not open a cursor for \"%s\": %s", query,
			 SPI_result_code_string(SPI_result));
	return portal;
}

/* A cursor over a plan, read with wals_sql_fetch. */
Portal
wals_sql_cursor_plan(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only)
{
	int			level = pin();
	Portal		portal = SPI_cursor_open(NULL, plan, (Datum *) values, nulls, read_only);

	unpin(level);
	if (portal == NULL)
		elog(ERROR, "wals: could not open a cursor: %s", SPI_result_code_string(SPI_result));
	return portal;
}

/* The next count rows of a cursor, in SPI_tuptable and SPI_processed. */
void
wals_sql_fetch(Portal portal, long count)
{
	int			level = pin();

	SPI_cursor_fetch(portal, true, count);
	unpin(level);
}
