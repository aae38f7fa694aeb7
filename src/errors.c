/*
 * errors.c
 *	  The one place where a failure of the core or of a training engine
 *	  becomes an ereport.
 *
 * Neither the core nor an engine raises errors itself (the core has no
 * server to raise them in, the CUDA engine lives in another library, and
 * parallel workers would each raise their own), so every caller hands its
 * status here together with what it was doing.  A failure gets the same
 * SQLSTATE and message whichever device trained, names the user or item
 * whose row failed by its id, and keeps the engine's own words (CUDA's
 * among them) for the detail.
 */
#include "postgres.h"

#include "wals.h"

/* "user 42" or "item 7" for the failing row, or NULL when none is known. */
static char *
failing_row(const WalsFailure *failure, const int64 *user_ids, const int64 *item_ids)
{
	const int64 *ids = failure->side == WALS_SIDE_USERS ? user_ids :
		failure->side == WALS_SIDE_ITEMS ? item_ids : NULL;

	if (ids == NULL || failure->row < 0)
		return NULL;
	return psprintf("%s " INT64_FORMAT, failure->side == WALS_SIDE_USERS ? "user" : "item",
					ids[failure->row]);
}

/*
 * Raise the error of failure while doing what (a phrase such as "training
 * model \"public.m\", iteration 3"); user_ids and item_ids turn the dense
 * row of the failure into the id the caller knows, and may be NULL when the
 * failure names no row.
 */
void
wals_report_failure(const WalsFailure *failure, const char *what,
					const int64 *user_ids, const int64 *item_ids)
{
	char	   *row = failing_row(failure, user_ids, item_ids);
	const char *detail = failure->detail[0] != '\0' ? failure->detail :
		wals_status_string(failure->status);

	switch (failure->status)
	{
		case WALS_OK:
			return;
		case WALS_ESINGULAR:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 row != NULL ?
					 errmsg("could not solve the factors of %s while %s", row, what) :
					 errmsg("could not solve the factors while %s", what),
					 failure->detail[0] != '\0' ? errdetail("%s", detail) :
					 errdetail("The system is not positive definite."),
					 errhint("Increase \"regularization\".")));
			break;
		case WALS_ENONFINITE:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 row != NULL ?
					 errmsg("the factors of %s became non-finite while %s", row, what) :
					 errmsg("factors became non-finite while %s", what),
					 errdetail("%s", detail),
					 errhint("Increase \"regularization\" or lower \"alpha\".")));
			break;
		case WALS_ETOOBIG:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many distinct ids while %s", what),
					 errdetail("%s", detail)));
			break;
		case WALS_ENOMEM:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory while %s", what),
					 errdetail("%s", detail),
					 errhint("Lower \"factors\", or pass device => 'cpu'.")));
			break;
		case WALS_EDEVICE:
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("the GPU failed while %s", what),
					 errdetail("%s", detail),
					 errhint("Pass device => 'cpu' to train on the CPU.")));
			break;
		case WALS_ECODES:
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("too many distinct ratings for codes while %s", what),
					 errdetail("%s", detail)));
			break;
		case WALS_EINVAL:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid input while %s", what),
					 errdetail("%s", detail)));
			break;
	}
}

/* Raise the error of a failed core call that concerns no particular row. */
void
wals_report_core_status(WalsStatus status, const char *what)
{
	WalsFailure failure = {status, WALS_SIDE_NONE, -1, ""};

	wals_report_failure(&failure, what, NULL, NULL);
}
