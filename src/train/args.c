/*
 * args.c
 *	  Checking and resolving the arguments of wals_train.
 *
 * Every argument is checked before any work starts, so a bad call costs
 * nothing and changes nothing.  Each error names the argument and its value
 * and says what would be accepted.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "wals_train.h"

static const char *const arg_names[] = {
	"source", "user_col", "item_col", "rating_col", "model", "factors",
	"iterations", "regularization", "feedback", "alpha", "unobserved_weight",
	"solver", "cg_steps", "device", "workers", "seed", "warm_start", "tolerance",
	"accelerate", "block_size", "regularization_exponent", "init_std", "validation",
	"patience", "validation_metric", "validation_table", "replace", "changed_col"
};

static void
require_not_null(const WalsTrainRequest *req, int arg)
{
	if (req->isnull[arg])
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"%s\" must not be null", arg_names[arg])));
}

static int
int_arg(const WalsTrainRequest *req, int arg, int min, int max)
{
	int			value;

	require_not_null(req, arg);
	value = DatumGetInt32(req->value[arg]);
	if (value < min || value > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"%s\": %d", arg_names[arg], value),
				 errhint("\"%s\" must be between %d and %d.", arg_names[arg], min, max)));
	return value;
}

/* A finite, non-negative real argument, at most max. */
static float
real_arg(const WalsTrainRequest *req, int arg, float max)
{
	float		value;

	require_not_null(req, arg);
	value = DatumGetFloat4(req->value[arg]);
	if (!isfinite(value) || value < 0 || value > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"%s\": %g", arg_names[arg], value),
				 errhint("\"%s\" must be a number between 0 and %g.", arg_names[arg], max)));
	return value;
}

static char *
column_arg(const WalsTrainRequest *req, int arg, const WalsTrainArgs *args, bool id)
{
	char	   *name;

	require_not_null(req, arg);
	name = NameStr(*DatumGetName(req->value[arg]));
	return wals_check_column(args->source, args->source_display, name, arg_names[arg], id);
}

static void
source_arg(const WalsTrainRequest *req, WalsTrainArgs *args)
{
	char	   *relname;

	require_not_null(req, WALS_ARG_SOURCE);
	args->source = DatumGetObjectId(req->value[WALS_ARG_SOURCE]);
	relname = wals_check_source(args->source, "source");
	if (get_rel_persistence(args->source) == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("relation \"%s\" given as \"source\" is temporary", relname),
				 errdetail("A model outlives the session, and wals_refresh_users() reads its source again."),
				 errhint("Train from a permanent table, for example one made with CREATE TABLE ... AS SELECT.")));
	args->source_name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(args->source)),
												   relname);
	args->source_display = relname;
}

/*
 * The model's schema and name: as given, or the source relation's name;
 * an unqualified name goes where CREATE TABLE would put a table.
 */
static void
model_arg(const WalsTrainRequest *req, WalsTrainArgs *args)
{
	WalsModelName mn;

	if (req->isnull[WALS_ARG_MODEL])
	{
		mn.schema = NULL;
		mn.name = pstrdup(get_rel_name(args->source));
		if ((int) strlen(mn.name) > WALS_MAX_MODEL_NAME)
			ereport(ERROR,
					(errcode(ERRCODE_NAME_TOO_LONG),
					 errmsg("model name \"%s\" is too long", mn.name),
					 errdetail("A model is named after its source unless \"model\" is given, and model names are at most %d bytes.",
							   WALS_MAX_MODEL_NAME),
					 errhint("Pass a shorter name as \"model\".")));
	}
	else
		wals_model_name_parse(text_to_cstring(DatumGetTextPP(req->value[WALS_ARG_MODEL])), "model", &mn);

	args->schema = wals_model_new_schema(&mn);
	args->model = mn.name;
	args->model_display = wals_model_display(get_namespace_name(args->schema), mn.name);
}

/* The value of argument arg, one of words. */
static int
word_arg(const WalsTrainRequest *req, WalsTrainArg arg, const WalsWord *words)
{
	require_not_null(req, arg);
	return wals_word_arg(words, text_to_cstring(DatumGetTextPP(req->value[arg])), arg_names[arg]);
}

static void
choice_args(const WalsTrainRequest *req, WalsTrainArgs *args)
{
	char	   *value;

	args->params.feedback = (WalsFeedback) word_arg(req, WALS_ARG_FEEDBACK, wals_feedback_words);
	args->params.solver = (WalsSolver) word_arg(req, WALS_ARG_SOLVER, wals_solver_words);
	args->accelerate = (WalsAccelerate) word_arg(req, WALS_ARG_ACCELERATE,
												 wals_accelerate_words);

	args->device = (WalsDevice) wals_device;
	if (!req->isnull[WALS_ARG_DEVICE])
	{
		value = text_to_cstring(DatumGetTextPP(req->value[WALS_ARG_DEVICE]));
		if (pg_strcasecmp(value, "auto") == 0)
			args->device = WALS_DEVICE_AUTO;
		else if (pg_strcasecmp(value, "cpu") == 0)
			args->device = WALS_DEVICE_CPU;
		else if (pg_strcasecmp(value, "gpu") == 0)
			args->device = WALS_DEVICE_GPU;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unrecognized value for \"device\": \"%s\"", value),
					 errhint("Valid values are \"auto\", \"cpu\" and \"gpu\".")));
	}
}

/*
 * Dimensions per block of the subspace solver: at most f, and meaningless
 * to the other solvers, where it is refused rather than ignored.
 */
static void
block_size_arg(const WalsTrainRequest *req, WalsTrainArgs *args)
{
	int			f = args->params.factors;

	if (req->isnull[WALS_ARG_BLOCK_SIZE])
	{
		args->params.block_size = Min(f, WALS_DEFAULT_BLOCK_SIZE);
		return;
	}
	if (args->params.solver != WALS_SUBSPACE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"block_size\" applies only to solver \"subspace\""),
				 errhint("Pass solver => 'subspace', or leave \"block_size\" out.")));
	args->params.block_size = int_arg(req, WALS_ARG_BLOCK_SIZE, 1, f);
}

/*
 * The cells held out for early stopping: a share of the source, above 0
 * and at most half, or a table with the source's id columns; the metric
 * and the patience, which mean nothing without them and are refused there.
 */
static void
validation_args(const WalsTrainRequest *req, WalsTrainArgs *args)
{
	const char *metric = WALS_DEFAULT_VALIDATION_METRIC;

	if (req->isnull[WALS_ARG_VALIDATION] && req->isnull[WALS_ARG_VALIDATION_TABLE])
	{
		for (int arg = WALS_ARG_PATIENCE; arg <= WALS_ARG_VALIDATION_METRIC; arg++)
			if (!req->isnull[arg])
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("\"%s\" applies only with \"validation\" or \"validation_table\"",
								arg_names[arg]),
						 errhint("Pass validation => 0.1 (a share of each user's items to hold out), or leave \"%s\" out.",
								 arg_names[arg])));
		return;
	}
	if (!req->isnull[WALS_ARG_VALIDATION] && !req->isnull[WALS_ARG_VALIDATION_TABLE])
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"validation\" and \"validation_table\" cannot both be given"),
				 errhint("Hold out a share of the source with \"validation\", or give the held-out cells as \"validation_table\".")));
	if (!req->isnull[WALS_ARG_VALIDATION])
	{
		args->validation = real_arg(req, WALS_ARG_VALIDATION, WALS_MAX_VALIDATION);
		if (args->validation == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for \"validation\": 0"),
					 errhint("\"validation\" must be above 0 and at most %g, or NULL for no early stopping.",
							 WALS_MAX_VALIDATION)));
	}
	else
	{
		args->validation_table = DatumGetObjectId(req->value[WALS_ARG_VALIDATION_TABLE]);
		args->validation_table_display = wals_check_source(args->validation_table,
														   "validation_table");
		wals_check_column(args->validation_table, args->validation_table_display,
						  args->user_col, "user_col", true);
		wals_check_column(args->validation_table, args->validation_table_display,
						  args->item_col, "item_col", true);
		wals_check_readable(args->validation_table,
							(const char *[]) {args->user_col, args->item_col}, 2);

		/*
		 * The owner the catalog will record, for a retraining to know the
		 * relation again: that of a table the catalog gave as it recorded
		 * it, which wals_retrain checked; store.c checks it once more once
		 * the training has read, and so locked, the relation.
		 */
		args->validation_owner = OidIsValid(req->validation_owner) ? req->validation_owner :
			wals_relation_owner(args->validation_table);
	}
	if (!req->isnull[WALS_ARG_VALIDATION_METRIC])
		metric = text_to_cstring(DatumGetTextPP(req->value[WALS_ARG_VALIDATION_METRIC]));
	if (!wals_metric_parse(metric, WALS_MAX_VALIDATION_K, &args->validation_kind,
						   &args->validation_k))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"validation_metric\": \"%s\"", metric),
				 errhint("\"validation_metric\" must be %s.", wals_metric_choices())));
	if (args->validation_kind == WALS_METRIC_RMSE && args->params.feedback != WALS_EXPLICIT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"validation_metric\" => 'rmse' applies only to explicit feedback"),
				 errhint("Pass feedback => 'explicit' for ratings whose values the model predicts, or a ranking metric such as 'ndcg@20'.")));
	if (args->validation_kind == WALS_METRIC_RMSE && OidIsValid(args->validation_table))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"validation_metric\" => 'rmse' needs a \"validation\" share"),
				 errhint("wals reads the cells of \"validation_table\" without their ratings: hold out a share of the source with validation => 0.1.")));
	args->validation_metric = pstrdup(metric);
	args->patience = req->isnull[WALS_ARG_PATIENCE] ? WALS_DEFAULT_PATIENCE :
		int_arg(req, WALS_ARG_PATIENCE, 1, WALS_MAX_ITERATIONS);
}

/*
 * Parse, check and resolve every argument of wals_train into args.  Raises
 * an error, before any work is done, for the first bad argument.
 */
void
wals_train_args_parse(const WalsTrainRequest *req, WalsTrainArgs *args)
{
	memset(args, 0, sizeof(*args));
	args->deadline = req->deadline;
	INSTR_TIME_SET_CURRENT(args->began);
	source_arg(req, args);
	args->user_col = column_arg(req, WALS_ARG_USER_COL, args, true);
	args->item_col = column_arg(req, WALS_ARG_ITEM_COL, args, true);
	if (strcmp(args->user_col, args->item_col) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"user_col\" and \"item_col\" are both column \"%s\"", args->user_col),
				 errhint("Users and items must come from two different columns.")));
	if (!req->isnull[WALS_ARG_RATING_COL])
		args->rating_col = column_arg(req, WALS_ARG_RATING_COL, args, false);
	if (!req->isnull[WALS_ARG_CHANGED_COL])
		args->changed_col = wals_check_changed_col(args->source, args->source_display,
												   NameStr(*DatumGetName(req->value[WALS_ARG_CHANGED_COL])));
	{
		const char *cols[4] = {args->user_col, args->item_col};
		int			ncols = 2;

		if (args->rating_col != NULL)
			cols[ncols++] = args->rating_col;
		if (args->changed_col != NULL)
			cols[ncols++] = args->changed_col;
		wals_check_readable(args->source, cols, ncols);
	}
	model_arg(req, args);
	choice_args(req, args);

	args->params.factors = int_arg(req, WALS_ARG_FACTORS, WALS_MIN_FACTORS, WALS_MAX_FACTORS);
	args->iterations = int_arg(req, WALS_ARG_ITERATIONS, WALS_MIN_ITERATIONS, WALS_MAX_ITERATIONS);
	args->params.cg_steps = int_arg(req, WALS_ARG_CG_STEPS, WALS_MIN_CG_STEPS, WALS_MAX_CG_STEPS);
	block_size_arg(req, args);
	args->params.regularization = real_arg(req, WALS_ARG_REGULARIZATION, WALS_MAX_REAL_PARAM);
	args->params.alpha = real_arg(req, WALS_ARG_ALPHA, WALS_MAX_REAL_PARAM);

	if (!req->isnull[WALS_ARG_UNOBSERVED_WEIGHT])
		args->params.w0 = real_arg(req, WALS_ARG_UNOBSERVED_WEIGHT, WALS_MAX_REAL_PARAM);
	else
		args->params.w0 = args->params.feedback == WALS_IMPLICIT ? 1.0f : 0.0f;

	args->workers_given = !req->isnull[WALS_ARG_WORKERS];
	args->workers = req->isnull[WALS_ARG_WORKERS] ? max_parallel_maintenance_workers :
		int_arg(req, WALS_ARG_WORKERS, WALS_MIN_WORKERS, WALS_MAX_WORKERS);

	require_not_null(req, WALS_ARG_SEED);
	args->seed = DatumGetInt32(req->value[WALS_ARG_SEED]);

	require_not_null(req, WALS_ARG_WARM_START);
	args->warm_start = DatumGetBool(req->value[WALS_ARG_WARM_START]);
	require_not_null(req, WALS_ARG_REPLACE);
	args->replace = DatumGetBool(req->value[WALS_ARG_REPLACE]);

	args->tolerance = req->isnull[WALS_ARG_TOLERANCE] ? -1.0 : real_arg(req, WALS_ARG_TOLERANCE, 1.0f);

	/* NULL: the scale and start of every model before them, bit for bit */
	if (!req->isnull[WALS_ARG_REGULARIZATION_EXPONENT])
	{
		args->params.frequency_scaled = true;
		args->params.reg_exponent = real_arg(req, WALS_ARG_REGULARIZATION_EXPONENT,
											 WALS_MAX_REG_EXPONENT);
	}
	args->init_std = req->isnull[WALS_ARG_INIT_STD] ? -1.0f :
		real_arg(req, WALS_ARG_INIT_STD, WALS_MAX_INIT_STD);
	/* from all-zero factors every sweep solves to zero again */
	if (args->init_std == 0.0f)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"init_std\": 0"),
				 errhint("\"init_std\" must be above 0: factors that all start at zero stay there.")));
	validation_args(req, args);
}
