/*
 * errors.c
 *	  The one place where a status of the core becomes an ereport.
 *
 * The core never raises errors itself (it has no server to raise them in),
 * so every caller hands its status here together with what it was doing.
 */
#include "postgres.h"

#include "wals.h"

/*
 * Raise the error for a failed core call; "what" names the step, row the
 * dense row that failed or -1.
 */
void
wals_report_core_status(WalsStatus status, const char *what, int64 row)
{
	if (status == WALS_OK)
		return;

	switch (status)
	{
		case WALS_ESINGULAR:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("could not solve the factors of row %lld while %s", (long long) row, what),
					 errdetail("The row's system is not positive definite (%s).", wals_status_string(status)),
					 errhint("Increase \"regularization\".")));
			break;
		case WALS_ENONFINITE:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("factors became non-finite at row %lld while %s", (long long) row, what),
					 errdetail("%s", wals_status_string(status)),
					 errhint("Increase \"regularization\" or lower \"alpha\".")));
			break;
		case WALS_ETOOBIG:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many distinct ids while %s", what),
					 errdetail("%s", wals_status_string(status))));
			break;
		case WALS_EINVAL:
		default:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid input while %s", what),
					 errdetail("%s", wals_status_string(status))));
	}
}
