/*
 * describe.c
 *	  The settings of a model carried by its own tables, so that a dump of
 *	  its schema alone keeps what wals_attach_model needs.
 *
 * The catalog (wals_models) belongs to the extension, and pg_dump dumps it
 * only with the whole database: a dump of one schema (pg_dump -n) or of
 * some tables (-t) holds a model's factor tables but not its catalog row.
 * So every training also writes what that row holds (the source and the
 * validation table, by their schema-qualified names, the settings, the
 * size, the loss) as JSON in the comment on column "factors" of the
 * model's user factor table, which pg_dump dumps with the table, after
 * WALS_DESCRIPTION_PREFIX.  The comment is written with
 * CreateComments, as COMMENT ON would write it, and no SQL text is made of
 * it.  A comment the owner put there in its place is left as it is (with
 * a NOTICE): a training never overwrites what is not its own.
 *
 * What is read back was written by whoever owns the table, who may have
 * written anything there: every value is checked as wals_train checks its
 * argument (its JSON type, then its range, finite numbers only), and a
 * value that does not pass is an error naming the field, before anything
 * is written.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/xact.h"
#include "catalog/pg_class.h"
#include "commands/comment.h"
#include "common/jsonapi.h"
#include "common/shortest_dec.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/varlena.h"

#include "wals_catalog.h"
#include "wals_metrics.h"

/*
 * The version of the description's layout, its field "format": 3 since
 * 0.7.0, which adds "changed_col"; 2, written by 0.6.0, names the
 * validation table schema-qualified, as the source; 1, written by 0.4.0
 * and 0.5.0, gave the validation table's name alone.  All three are read.
 */
#define DESCRIPTION_FORMAT		3
#define DESCRIPTION_FORMAT_NO_CHANGED_COL	2
#define DESCRIPTION_FORMAT_NAME_ALONE	1

/*
 * The longest description read: a training writes well under 2 kB, and a
 * longer one is not wals's.
 */
#define DESCRIPTION_MAX_BYTES	(64 * 1024)

/* The longest text field read: names, qualified or not. */
#define DESCRIPTION_MAX_TEXT	1024

/* ---------- writing ---------- */

static void
add_key(StringInfo buf, const char *key)
{
	if (buf->data[buf->len - 1] != '{')
		appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfoString(buf, ": ");
}

static void
add_text(StringInfo buf, const char *key, const char *value)
{
	add_key(buf, key);
	if (value == NULL)
		appendStringInfoString(buf, "null");
	else
		escape_json(buf, value);
}

static void
add_int(StringInfo buf, const char *key, int64 value, bool isnull)
{
	add_key(buf, key);
	if (isnull)
		appendStringInfoString(buf, "null");
	else
		appendStringInfo(buf, INT64_FORMAT, value);
}

/* A real of the catalog, in the fewest digits that read back as it. */
static void
add_real(StringInfo buf, const char *key, float value, bool isnull)
{
	char		digits[FLOAT_SHORTEST_DECIMAL_LEN];

	add_key(buf, key);
	if (isnull || !isfinite(value))
		appendStringInfoString(buf, "null");
	else
	{
		float_to_shortest_decimal_buf(value, digits);
		appendStringInfoString(buf, digits);
	}
}

static void
add_double(StringInfo buf, const char *key, double value, bool isnull)
{
	char		digits[DOUBLE_SHORTEST_DECIMAL_LEN];

	add_key(buf, key);
	if (isnull || !isfinite(value))
		appendStringInfoString(buf, "null");
	else
	{
		double_to_shortest_decimal_buf(value, digits);
		appendStringInfoString(buf, digits);
	}
}

/* A moment as ISO 8601 in UTC, to the microsecond: 2024-05-01T03:00:00.000000Z */
static char *
iso_time(TimestampTz t)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (TIMESTAMP_NOT_FINITE(t) || timestamp2tm(t, NULL, &tm, &fsec, NULL, NULL) != 0)
		return NULL;
	return psprintf("%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year, tm.tm_mon, tm.tm_mday,
					tm.tm_hour, tm.tm_min, tm.tm_sec, (int) fsec);
}

/* A relation's schema-qualified name, quoted; NULL for none or one gone. */
static char *
qualified_name(Oid relid)
{
	char	   *name = OidIsValid(relid) ? get_rel_name(relid) : NULL;

	if (name == NULL)
		return NULL;
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), name);
}

/*
 * The description of a model: its catalog row as JSON, less what only
 * this database knows (the numbers of its relations and roles), with the
 * source and the validation table by their schema-qualified names.
 */
char *
wals_description_text(const WalsCatalogRow *row)
{
	const WalsParams *p = &row->params;
	bool		validating = row->validation_metric != NULL;
	char	   *source = qualified_name(row->source);
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	add_int(&buf, "format", DESCRIPTION_FORMAT, false);
	add_text(&buf, "source", source);
	add_text(&buf, "user_col", row->user_col);
	add_text(&buf, "item_col", row->item_col);
	add_text(&buf, "rating_col", row->rating_col);
	add_text(&buf, "changed_col", row->changed_col);
	add_text(&buf, "feedback", wals_feedback_name(p->feedback));
	add_int(&buf, "factors", p->factors, false);
	add_int(&buf, "iterations", row->iterations, false);
	add_int(&buf, "max_iterations", row->max_iterations, false);
	add_real(&buf, "regularization", p->regularization, false);
	add_real(&buf, "alpha", p->alpha, false);
	add_real(&buf, "unobserved_weight", p->w0, false);
	add_text(&buf, "solver", wals_solver_name(p->solver));
	add_int(&buf, "cg_steps", p->cg_steps, false);
	add_int(&buf, "block_size", p->block_size, p->solver != WALS_SUBSPACE);
	add_real(&buf, "regularization_exponent", p->reg_exponent, !p->frequency_scaled);
	add_int(&buf, "seed", row->seed, false);
	add_real(&buf, "tolerance", (float) row->tolerance, row->tolerance < 0);
	add_key(&buf, "warm_start");
	appendStringInfoString(&buf, row->warm_start ? "true" : "false");
	add_text(&buf, "accelerate", row->accelerate);
	add_real(&buf, "init_std", row->init_std, row->init_std < 0);
	add_real(&buf, "validation", (float) row->validation, row->validation <= 0);
	add_text(&buf, "validation_table", qualified_name(row->validation_table));
	add_text(&buf, "validation_metric", row->validation_metric);
	add_int(&buf, "patience", row->patience, !validating);
	add_int(&buf, "best_iteration", row->best_iteration, !validating);
	add_double(&buf, "validation_score", row->validation_score, !validating);
	add_int(&buf, "users", row->users, false);
	add_int(&buf, "items", row->items, false);
	add_int(&buf, "ratings", row->ratings, false);
	add_double(&buf, "loss", row->loss, false);
	add_text(&buf, "device", row->device);
	add_int(&buf, "workers", row->workers, false);
	add_double(&buf, "load_s", row->load_s, false);
	add_double(&buf, "train_s", row->train_s, false);
	add_double(&buf, "store_s", row->store_s, false);
	add_double(&buf, "total_s", row->total_s, false);
	add_int(&buf, "version", row->version, false);
	add_text(&buf, "trained_at", iso_time(row->trained_at));
	add_text(&buf, "trained_by", GetUserNameFromId(GetUserId(), false));
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * Describe a model just trained on its user factor table: the comment on
 * its column "factors", written as the model's owner, unless the comment
 * there is not a description of wals's.
 */
void
wals_model_describe(const WalsCatalogRow *row)
{
	AttrNumber	attnum = get_attnum(row->user_rel, "factors");
	char	   *comment;
	WalsRoleSave save;

	if (attnum <= 0)
		return;
	comment = GetComment(row->user_rel, RelationRelationId, attnum);
	if (comment != NULL &&
		strncmp(comment, WALS_DESCRIPTION_PREFIX, strlen(WALS_DESCRIPTION_PREFIX)) != 0)
	{
		ereport(NOTICE,
				(errmsg("the comment on column \"factors\" of %s is left as it is",
						wals_relation_name(row->user_rel)),
				 errdetail("wals describes model \"%s\" there, for a dump of its schema alone, but the comment is not its own.",
						   wals_model_display(row->schema, row->model)),
				 errhint("Remove the comment (COMMENT ON COLUMN ... IS NULL) and train the model again, for wals_attach_model() to find the model's settings after such a dump.")));
		return;
	}
	wals_become(row->owner, &save);
	CreateComments(row->user_rel, RelationRelationId, attnum,
				   psprintf("%s%s", WALS_DESCRIPTION_PREFIX, wals_description_text(row)));
	wals_unbecome(&save);
	CommandCounterIncrement();
}

/* ---------- reading ---------- */

typedef struct Reader
{
	JsonbContainer *root;
	const char *display;		/* the model, for messages */
} Reader;

pg_noreturn static void bad(const Reader *r, const char *field, const char *why);

static void
bad(const Reader *r, const char *field, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid description of model \"%s\": \"%s\" %s", r->display, field, why),
			 errhint("Train the model again with wals_train(), or write its description back as wals wrote it.")));
}

/* Field key, of JSON type type; NULL for a JSON null where nullable. */
static JsonbValue *
field(const Reader *r, const char *key, enum jbvType type, bool nullable)
{
	JsonbValue *v = getKeyJsonValueFromContainer(r->root, key, strlen(key), NULL);
	const char *want = type == jbvString ? "a string" : type == jbvNumeric ? "a number" :
		"true or false";

	if (v == NULL)
		bad(r, key, "is missing");
	if (v->type == jbvNull)
	{
		if (!nullable)
			bad(r, key, psprintf("is null, and must be %s", want));
		return NULL;
	}
	if (v->type != type)
		bad(r, key, psprintf("must be %s%s", want, nullable ? " or null" : ""));
	return v;
}

/* A number's digits, shortened for messages. */
static char *
number_text(const JsonbValue *v)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
}

static char *
shown(const char *digits)
{
	return strlen(digits) > 40 ? psprintf("%.40s...", digits) : pstrdup(digits);
}

/* An integer field between min and max; *isnull where nullable. */
static int64
int_field(const Reader *r, const char *key, int64 min, int64 max, bool *isnull)
{
	JsonbValue *v = field(r, key, jbvNumeric, isnull != NULL);
	char	   *digits;
	const char *p;
	char	   *end;
	int64		value;

	if (isnull != NULL)
		*isnull = v == NULL;
	if (v == NULL)
		return 0;
	digits = number_text(v);
	p = digits[0] == '-' ? digits + 1 : digits;
	if (*p == '\0' || strspn(p, "0123456789") != strlen(p))
		bad(r, key, psprintf("is %s, and must be a whole number", shown(digits)));
	errno = 0;
	value = strtoi64(digits, &end, 10);
	if (errno != 0 || *end != '\0' || value < min || value > max)
		bad(r, key, psprintf("is %s, and must be between " INT64_FORMAT " and " INT64_FORMAT,
							 shown(digits), min, max));
	return value;
}

/*
 * A number field between min and max (above min where above), as a real
 * (a float4 of the catalog) or a double; *isnull where nullable.
 */
static double
number_field(const Reader *r, const char *key, double min, double max, bool above,
			 bool real, bool *isnull)
{
	JsonbValue *v = field(r, key, jbvNumeric, isnull != NULL);
	char	   *digits;
	char	   *end;
	double		value;

	if (isnull != NULL)
		*isnull = v == NULL;
	if (v == NULL)
		return 0;
	digits = number_text(v);
	errno = 0;
	value = real ? (double) strtof(digits, &end) : strtod(digits, &end);
	if (errno != 0 || *end != '\0' || !isfinite(value) || value < min || value > max ||
		(above && value == min))
		bad(r, key, psprintf("is %s, and must be a number %s %g and at most %g",
							 shown(digits), above ? "above" : "from", min, max));
	return value;
}

/* A text field of at most DESCRIPTION_MAX_TEXT bytes; NULL where nullable. */
static char *
text_field(const Reader *r, const char *key, bool nullable, int max_bytes)
{
	JsonbValue *v = field(r, key, jbvString, nullable);

	if (v == NULL)
		return NULL;
	if (v->val.string.len == 0 || v->val.string.len > max_bytes)
		bad(r, key, psprintf("must be a string of 1 to %d bytes", max_bytes));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* A text field that must be one of words; its value. */
static int
word_field(const Reader *r, const char *key, const WalsWord *words)
{
	char	   *value = text_field(r, key, false, DESCRIPTION_MAX_TEXT);
	int			v;

	if (!wals_word_parse(words, value, &v))
		bad(r, key, psprintf("is \"%s\", and must be one of %s", shown(value),
							 wals_word_choices(words)));
	return v;
}

/* Two digits (or n) at s, or -1. */
static int
digits_at(const char *s, int n)
{
	int			v = 0;

	for (int i = 0; i < n; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* trained_at, as iso_time writes it. */
static TimestampTz
time_field(const Reader *r, const char *key)
{
	char	   *s = text_field(r, key, false, DESCRIPTION_MAX_TEXT);
	struct pg_tm tm;
	int			usec;
	Timestamp	t;

	memset(&tm, 0, sizeof(tm));
	if (strlen(s) != 27 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
		s[16] != ':' || s[19] != '.' || s[26] != 'Z' ||
		(tm.tm_year = digits_at(s, 4)) < 1 || (tm.tm_mon = digits_at(s + 5, 2)) < 1 ||
		tm.tm_mon > 12 || (tm.tm_mday = digits_at(s + 8, 2)) < 1 ||
		tm.tm_mday > day_tab[isleap(tm.tm_year)][tm.tm_mon - 1] ||
		(tm.tm_hour = digits_at(s + 11, 2)) < 0 || tm.tm_hour > 23 ||
		(tm.tm_min = digits_at(s + 14, 2)) < 0 || tm.tm_min > 59 ||
		(tm.tm_sec = digits_at(s + 17, 2)) < 0 || tm.tm_sec > 59 ||
		(usec = digits_at(s + 20, 6)) < 0 ||
		tm2timestamp(&tm, usec, NULL, &t) != 0)
		bad(r, key, psprintf("is \"%s\", and must be a time written as 2024-05-01T03:00:00.000000Z",
							 shown(s)));
	return t;
}

/* An error context that says which description is being read. */
static void
reading_context(void *arg)
{
	errcontext("reading the description of model \"%s\"", (const char *) arg);
}

/*
 * A relation the description names by its schema-qualified name, split
 * into out, which the caller resolves and checks; both NULL for a null.
 */
static void
qualified_field(Reader *r, const char *key, WalsDescribedRelation *out)
{
	char	   *given = text_field(r, key, true, DESCRIPTION_MAX_TEXT);
	List	   *parts;

	out->schema = out->name = NULL;
	if (given == NULL)
		return;
	if (!SplitIdentifierString(pstrdup(given), '.', &parts) || list_length(parts) != 2)
		bad(r, key, psprintf("is \"%s\", and must be a schema-qualified relation name",
							 shown(given)));
	out->schema = linitial(parts);
	out->name = lsecond(parts);
}

/*
 * The source and the columns, which the caller resolves and checks.  The
 * mark is not described: it moves with every refresh, and a model attached
 * from its tables takes a new one at its next training.
 */
static void
read_columns(Reader *r, int format, WalsCatalogRow *row, WalsDescribedRelation *source)
{
	qualified_field(r, "source", source);
	row->user_col = text_field(r, "user_col", false, NAMEDATALEN - 1);
	row->item_col = text_field(r, "item_col", false, NAMEDATALEN - 1);
	if (strcmp(row->user_col, row->item_col) == 0)
		bad(r, "item_col", "is \"user_col\" too: users and items come from two columns");
	row->rating_col = text_field(r, "rating_col", true, NAMEDATALEN - 1);
	if (format >= DESCRIPTION_FORMAT)
		row->changed_col = text_field(r, "changed_col", true, NAMEDATALEN - 1);
}

/* The training's parameters, each checked as wals_train checks its own. */
static void
read_params(Reader *r, WalsCatalogRow *row)
{
	WalsParams *p = &row->params;
	bool		isnull;

	memset(p, 0, sizeof(*p));
	p->feedback = (WalsFeedback) word_field(r, "feedback", wals_feedback_words);
	p->factors = (int) int_field(r, "factors", WALS_MIN_FACTORS, WALS_MAX_FACTORS, NULL);
	row->max_iterations = (int) int_field(r, "max_iterations", WALS_MIN_ITERATIONS,
										  WALS_MAX_ITERATIONS, NULL);
	row->iterations = (int) int_field(r, "iterations", 1, row->max_iterations, NULL);
	p->regularization = (float) number_field(r, "regularization", 0, WALS_MAX_REAL_PARAM,
											 false, true, NULL);
	p->alpha = (float) number_field(r, "alpha", 0, WALS_MAX_REAL_PARAM, false, true, NULL);
	p->w0 = (float) number_field(r, "unobserved_weight", 0, WALS_MAX_REAL_PARAM, false, true,
								 NULL);
	p->solver = (WalsSolver) word_field(r, "solver", wals_solver_words);
	p->cg_steps = (int) int_field(r, "cg_steps", WALS_MIN_CG_STEPS, WALS_MAX_CG_STEPS, NULL);
	p->block_size = (int) int_field(r, "block_size", 1, p->factors, &isnull);
	if (isnull != (p->solver != WALS_SUBSPACE))
		bad(r, "block_size", p->solver == WALS_SUBSPACE ?
			"is null, and solver \"subspace\" needs one" :
			"is given, and applies only to solver \"subspace\"");
	if (isnull)
		p->block_size = Min(p->factors, WALS_DEFAULT_BLOCK_SIZE);
	p->reg_exponent = (float) number_field(r, "regularization_exponent", 0,
										   WALS_MAX_REG_EXPONENT, false, true, &isnull);
	p->frequency_scaled = !isnull;
	row->seed = (int) int_field(r, "seed", PG_INT32_MIN, PG_INT32_MAX, NULL);
	row->tolerance = number_field(r, "tolerance", 0, 1, false, true, &isnull);
	if (isnull)
		row->tolerance = -1;
	row->warm_start = field(r, "warm_start", jbvBool, false)->val.boolean;
	row->accelerate = wals_accelerate_name((WalsAccelerate) word_field(r, "accelerate",
																	wals_accelerate_words));
	row->init_std = (float) number_field(r, "init_std", 0, WALS_MAX_INIT_STD, true, true,
										 &isnull);
	if (isnull)
		row->init_std = -1;
}

/* A field of the validation: given exactly when the training validated. */
static void
validation_field_given(Reader *r, const char *key, bool isnull, bool validating)
{
	if (isnull == validating)
		bad(r, key, validating ? "is null, and a validation needs one" :
			"is given without \"validation\" or \"validation_table\"");
}

/*
 * The validation: a share, or a table (left in table for the caller to
 * resolve: by its schema-qualified name, or in format 1 by its name alone,
 * schema NULL), with its metric, patience and outcome.
 */
static void
read_validation(Reader *r, int format, WalsCatalogRow *row, WalsDescribedRelation *table)
{
	bool		isnull;
	bool		validating;
	WalsMetricKind kind;
	int			k;

	row->validation = number_field(r, "validation", 0, WALS_MAX_VALIDATION, true, true,
								   &isnull);
	if (format == DESCRIPTION_FORMAT_NAME_ALONE)
	{
		table->schema = NULL;
		table->name = text_field(r, "validation_table", true, NAMEDATALEN - 1);
	}
	else
		qualified_field(r, "validation_table", table);
	if (!isnull && table->name != NULL)
		bad(r, "validation_table", "is given with \"validation\", and only one of them may be");
	validating = !isnull || table->name != NULL;
	row->validation_metric = text_field(r, "validation_metric", true, DESCRIPTION_MAX_TEXT);
	validation_field_given(r, "validation_metric", row->validation_metric == NULL, validating);
	if (validating &&
		!wals_metric_parse(row->validation_metric, WALS_MAX_VALIDATION_K, &kind, &k))
		bad(r, "validation_metric",
			psprintf("is \"%s\", and must be %s", shown(row->validation_metric),
					 wals_metric_choices()));
	row->patience = (int) int_field(r, "patience", 1, WALS_MAX_ITERATIONS, &isnull);
	validation_field_given(r, "patience", isnull, validating);
	row->best_iteration = (int) int_field(r, "best_iteration", 1, row->iterations, &isnull);
	validation_field_given(r, "best_iteration", isnull, validating);
	row->validation_score = number_field(r, "validation_score", -DBL_MAX, DBL_MAX, false,
										 false, &isnull);
	validation_field_given(r, "validation_score", isnull, validating);
}

/* What the training did: its size, loss, device, seconds and version. */
static void
read_outcome(Reader *r, WalsCatalogRow *row)
{
	static const WalsWord devices[] = {{"cpu", 0}, {"gpu", 1}, {"shards", 2}, {NULL, 0}};

	row->users = int_field(r, "users", 1, PG_INT64_MAX, NULL);
	row->items = int_field(r, "items", 1, PG_INT64_MAX, NULL);
	row->ratings = int_field(r, "ratings", 1, PG_INT64_MAX, NULL);
	row->loss = number_field(r, "loss", 0, DBL_MAX, false, false, NULL);
	row->device = wals_word_name(devices, word_field(r, "device", devices));
	row->workers = (int) int_field(r, "workers", 0, PG_INT32_MAX, NULL);
	row->load_s = number_field(r, "load_s", 0, DBL_MAX, false, false, NULL);
	row->train_s = number_field(r, "train_s", 0, DBL_MAX, false, false, NULL);
	row->store_s = number_field(r, "store_s", 0, DBL_MAX, false, false, NULL);
	row->total_s = number_field(r, "total_s", 0, DBL_MAX, false, false, NULL);
	row->version = int_field(r, "version", 1, PG_INT64_MAX, NULL);
	row->trained_at = time_field(r, "trained_at");
	(void) text_field(r, "trained_by", false, NAMEDATALEN - 1);
}

/* Whether the description is JSON of a length wals reads. */
static void
check_json(const char *text, const char *display)
{
	int			len = strlen(text);
	JsonLexContext *lex;
	JsonParseErrorType parsed;

	if (len > DESCRIPTION_MAX_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid description of model \"%s\": it is %d bytes long", display, len),
				 errdetail("wals writes one of a few hundred bytes, and reads one of at most %d.",
						   DESCRIPTION_MAX_BYTES),
				 errhint("Train the model again with wals_train(), or write its description back as wals wrote it.")));
	lex = makeJsonLexContextCstringLen(pstrdup(text), len, GetDatabaseEncoding(), true);
	parsed = pg_parse_json(lex, &nullSemAction);
	if (parsed != JSON_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid description of model \"%s\": it is not JSON", display),
				 errdetail("%s", json_errdetail(parsed, lex)),
				 errhint("Train the model again with wals_train(), or write its description back as wals wrote it.")));
}

/*
 * Read a description (the comment after WALS_DESCRIPTION_PREFIX) into row,
 * every value checked; display names the model in errors.  The source and
 * the validation table are left to the caller, as the relations the
 * description names (see WalsDescribedRelation).  Fills what the
 * description holds, nothing else of row.
 */
void
wals_description_parse(const char *text, const char *display, WalsCatalogRow *row,
					   WalsDescribedRelation *source, WalsDescribedRelation *validation)
{
	ErrorContextCallback context;
	Jsonb	   *jb;
	Reader		r;
	int64		format;

	check_json(text, display);
	context.callback = reading_context;
	context.arg = (void *) display;
	context.previous = error_context_stack;
	error_context_stack = &context;
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
	if (!JB_ROOT_IS_OBJECT(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid description of model \"%s\": it is not a JSON object", display),
				 errhint("Train the model again with wals_train(), or write its description back as wals wrote it.")));
	r.root = &jb->root;
	r.display = display;
	format = int_field(&r, "format", PG_INT32_MIN, PG_INT32_MAX, NULL);
	if (format < DESCRIPTION_FORMAT_NAME_ALONE || format > DESCRIPTION_FORMAT)
		bad(&r, "format", psprintf("is not %d, %d or %d, the formats this version of wals reads",
								   DESCRIPTION_FORMAT_NAME_ALONE,
								   DESCRIPTION_FORMAT_NO_CHANGED_COL, DESCRIPTION_FORMAT));
	read_columns(&r, (int) format, row, source);
	read_params(&r, row);
	read_validation(&r, (int) format, row, validation);
	read_outcome(&r, row);
	error_context_stack = context.previous;
}
