/*
 * vocabulary.c
 *	  The words of the options a model records: each vocabulary is one
 *	  table, read the same way by every argument, catalog row and
 *	  description that names its values.
 *
 * A value is matched without regard to case wherever it comes from (an
 * argument of wals_train or wals_retrain, a catalog row, the description
 * on a dumped factor table, a shard's message), and always written with
 * the table's own spelling, so that what wals records is one word a value
 * whatever was given.  The metrics, named with their k, are
 * src/core/metrics.c's (wals_metric_parse, wals_metric_name).
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "wals_catalog.h"

const WalsWord wals_feedback_words[] = {
	{"implicit", WALS_IMPLICIT}, {"explicit", WALS_EXPLICIT}, {NULL, 0}
};

const WalsWord wals_solver_words[] = {
	{"cg", WALS_CG}, {"cholesky", WALS_CHOLESKY}, {"subspace", WALS_SUBSPACE}, {NULL, 0}
};

const WalsWord wals_accelerate_words[] = {
	{"none", WALS_ACCEL_NONE}, {"ncg", WALS_ACCEL_NCG}, {NULL, 0}
};

/* The value words names given, in *value; false when it names none. */
bool
wals_word_parse(const WalsWord *words, const char *given, int *value)
{
	for (int i = 0; words[i].name != NULL; i++)
		if (pg_strcasecmp(given, words[i].name) == 0)
		{
			*value = words[i].value;
			return true;
		}
	return false;
}

/*
 * The value words names given, given as argument arg: an error saying
 * which words it may be when it names none.
 */
int
wals_word_arg(const WalsWord *words, const char *given, const char *arg)
{
	int			value;

	if (!wals_word_parse(words, given, &value))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unrecognized value for \"%s\": \"%s\"", arg, given),
				 errhint("Valid values are %s.", wals_word_choices(words))));
	return value;
}

/* The word of value; every value of an enum has one. */
const char *
wals_word_name(const WalsWord *words, int value)
{
	for (int i = 0; words[i].name != NULL; i++)
		if (words[i].value == value)
			return words[i].name;
	elog(ERROR, "wals: no word for value %d", value);
	return NULL;				/* keep compiler quiet */
}

/* The words, for a hint: "a", "b" and "c". */
char *
wals_word_choices(const WalsWord *words)
{
	StringInfoData buf;
	int			n = 0;

	while (words[n].name != NULL)
		n++;
	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s\"%s\"", i == 0 ? "" : i == n - 1 ? " and " : ", ",
						 words[i].name);
	return buf.data;
}

/* The metrics wals_metric_parse reads, for a hint. */
char *
wals_metric_choices(void)
{
	return psprintf("ndcg@k, recall@k, precision@k or map@k with k from 1 to %d, auc, or rmse (explicit feedback)",
					WALS_MAX_VALIDATION_K);
}

const char *
wals_feedback_name(WalsFeedback feedback)
{
	return wals_word_name(wals_feedback_words, feedback);
}

const char *
wals_solver_name(WalsSolver solver)
{
	return wals_word_name(wals_solver_words, solver);
}

const char *
wals_accelerate_name(WalsAccelerate accelerate)
{
	return wals_word_name(wals_accelerate_words, accelerate);
}
