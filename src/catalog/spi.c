/*
 * spi.c
 *	  The two ways wals runs SQL through SPI: a query run once, and a plan
 *	  kept for the life of the backend.  Both take their values as
 *	  parameters, never as text.
 */
#include "postgres.h"

#include "executor/spi.h"

#include "wals_catalog.h"

/* Run a query with parameters, none null; expected is an SPI result or -1. */
void
wals_spi_exec(const char *query, int nargs, const Oid *types,
			  const Datum *values, int expected)
{
	int			rc = SPI_execute_with_args(query, nargs, (Oid *) types,
										   (Datum *) values, NULL, false, 0);

	if (rc < 0 || (expected >= 0 && rc != expected))
		elog(ERROR, "wals: query \"%s\" failed: %s", query, SPI_result_code_string(rc));
}

/* A plan prepared and kept for the life of the backend. */
SPIPlanPtr
wals_keep_plan(const char *query, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(query, nargs, types);

	if (plan == NULL)
		elog(ERROR, "wals: could not prepare \"%s\": %s", query, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "wals: could not keep the plan of \"%s\"", query);
	return plan;
}
