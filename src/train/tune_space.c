/*
 * tune_space.c
 *	  The space wals_tune searches: its defaults, the space a caller
 *	  gives, and each configuration sampled from it, seeded.
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "tune_internal.h"

/*
 * The default space of implicit feedback, after Rendle et al.:
 * frequency-scaled or classic regularization, whose useful ranges differ
 * by the scale n + w0 N of the first, small unobserved weights, little or
 * no extra confidence.  Of explicit feedback, ALS-WR as Spark's ALS and
 * Zhou et al. tune it: the observed ratings alone (no unobserved weight,
 * no confidence), lambda scaled by each row's ratings, narrower models.
 */
void
wals_tune_default_space(TuneDim *dims, WalsFeedback feedback)
{
	TuneDim		implicit[NDIMS] = {
		{"factors", true, 5, {32, 64, 128, 256, 512}},
		{"regularization", false, 0, {0}, 0, 0},
		{"regularization_exponent", false, 2, {NAN, 1}},
		{"unobserved_weight", false, 0, {0}, 0.001, 1.0},
		{"alpha", false, 4, {0, 1, 4, 16}},
		{"init_std", false, 1, {0.1}},
	};
	TuneDim		explicit[NDIMS] = {
		{"factors", true, 5, {8, 16, 32, 64, 128}},
		{"regularization", false, 0, {0}, 0.005, 0.5},
		{"regularization_exponent", false, 1, {NAN}},
		{"unobserved_weight", false, 1, {0}},
		{"alpha", false, 1, {1}},
		{"init_std", false, 1, {0.1}},
	};

	memcpy(dims, feedback == WALS_EXPLICIT ? explicit : implicit, sizeof(implicit));
}

/* A uniform in [0, 1) for (seed, trial, dimension). */
static double
uniform(int seed, int trial, int dim)
{
	uint64		h = wals_mix64((uint64) (uint32) seed * UINT64CONST(0x9e3779b97f4a7c15) +
							   (uint64) trial * UINT64CONST(0xbf58476d1ce4e5b9) +
							   (uint64) dim + 1);

	return (double) (h >> 11) * (1.0 / 9007199254740992.0);
}

static double
sample(const TuneDim *d, double u, double min, double max)
{
	if (d->nchoices > 0)
		return d->choices[Min((int) (u * d->nchoices), d->nchoices - 1)];
	if (min > 0)
		return exp(log(min) + u * (log(max) - log(min)));
	return min + u * (max - min);
}

void
wals_tune_sample_trial(const TuneDim *dims, int seed, int t, TuneTrial *trial)
{
	/* the exponent decides lambda's range: sample it first */
	trial->v[DIM_EXPONENT] = sample(&dims[DIM_EXPONENT], uniform(seed, t, DIM_EXPONENT), 0, 0);
	for (int k = 0; k < NDIMS; k++)
	{
		double		min = dims[k].min;
		double		max = dims[k].max;

		if (k == DIM_EXPONENT)
			continue;
		/* unless the space sets it, lambda's range follows the scale */
		if (k == DIM_REGULARIZATION && min == 0 && max == 0)
		{
			bool		scaled = !isnan(trial->v[DIM_EXPONENT]);

			min = scaled ? 1e-4 : 0.01;
			max = scaled ? 0.1 : 1000.0;
		}
		trial->v[k] = sample(&dims[k], uniform(seed, t, k), min, max);
		if (dims[k].integer)
			trial->v[k] = rint(trial->v[k]);
	}
}

static void
bad_space(const char *key, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid \"space\" for \"%s\": %s", key, why),
			 errhint("Give each parameter an array of values, such as [32, 64], or a range, such as {\"min\": 0.001, \"max\": 1}.")));
}

/* A value of the space, checked as wals_train will check it. */
static double
space_value(const char *key, const char *text, bool allow_null)
{
	char	   *end;
	double		v;

	if (text == NULL)
	{
		if (!allow_null)
			bad_space(key, "null is allowed only for regularization_exponent");
		return NAN;
	}
	v = strtod(text, &end);
	if (*end != '\0' || !isfinite(v) || v < 0)
		bad_space(key, psprintf("\"%s\" is not a number of 0 or more", text));
	return v;
}

/* Override dims with the keys of space, through jsonb's own functions. */
void
wals_tune_parse_space(Jsonb *space, TuneDim *dims)
{
	Oid			type = JSONBOID;
	Datum		arg = JsonbPGetDatum(space);
	SPITupleTable *keys;

	if (wals_sql("SELECT key, pg_catalog.jsonb_typeof(value), value FROM pg_catalog.jsonb_each($1)",
				 1, &type, &arg, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "wals: could not read \"space\"");
	keys = SPI_tuptable;
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		char	   *key = SPI_getvalue(keys->vals[r], keys->tupdesc, 1);
		char	   *kind = SPI_getvalue(keys->vals[r], keys->tupdesc, 2);
		bool		isnull;
		Datum		value = SPI_getbinval(keys->vals[r], keys->tupdesc, 3, &isnull);
		TuneDim    *d = NULL;
		uint64		n = SPI_processed;

		for (int k = 0; k < NDIMS; k++)
			if (strcmp(key, dims[k].name) == 0)
				d = &dims[k];
		if (d == NULL)
			bad_space(key, "not a parameter wals_tune searches (factors, regularization, regularization_exponent, unobserved_weight, alpha, init_std)");
		if (strcmp(kind, "array") == 0)
		{
			SPITupleTable *items;

			if (wals_sql("SELECT pg_catalog.jsonb_array_elements($1)"
						 " OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[]",
						 1, &type, &value, NULL, true, 0) != SPI_OK_SELECT)
				elog(ERROR, "wals: could not read \"space\"");
			items = SPI_tuptable;
			if (SPI_processed == 0 || SPI_processed > TUNE_CHOICES)
				bad_space(key, psprintf("give 1 to %d values", TUNE_CHOICES));
			d->nchoices = (int) SPI_processed;
			for (uint64 i = 0; i < SPI_processed; i++)
				d->choices[i] = space_value(key, SPI_getvalue(items->vals[i], items->tupdesc, 1),
											d == &dims[DIM_EXPONENT]);
			SPI_freetuptable(items);
		}
		else if (strcmp(kind, "object") == 0 && !d->integer && d != &dims[DIM_EXPONENT])
		{
			SPITupleTable *range;

			if (wals_sql("SELECT $1 OPERATOR(pg_catalog.->>) 'min'::pg_catalog.text,"
						 " $1 OPERATOR(pg_catalog.->>) 'max'::pg_catalog.text",
						 1, &type, &value, NULL, true, 0) != SPI_OK_SELECT)
				elog(ERROR, "wals: could not read \"space\"");
			range = SPI_tuptable;
			d->nchoices = 0;
			d->min = space_value(key, SPI_getvalue(range->vals[0], range->tupdesc, 1), false);
			d->max = space_value(key, SPI_getvalue(range->vals[0], range->tupdesc, 2), false);
			if (!(d->min <= d->max) || (d->min == 0 && d->max == 0))
				bad_space(key, "give a range with 0 <= min <= max, max above 0");
			SPI_freetuptable(range);
		}
		else
			bad_space(key, d->integer || d == &dims[DIM_EXPONENT] ?
					  "give an array of values" : "give an array of values or a range");
		SPI_processed = n;
	}
}

/* The solver of a trial, and what wraps it: see TUNE_SUBSPACE_FACTORS. */
WalsSolver
wals_tune_trial_solver(const TuneTrial *t)
{
	return t->v[DIM_FACTORS] >= TUNE_SUBSPACE_FACTORS ? WALS_SUBSPACE : WALS_CG;
}

WalsAccelerate
wals_tune_trial_accelerate(const TuneTrial *t)
{
	return wals_tune_trial_solver(t) == WALS_SUBSPACE ? WALS_ACCEL_NCG : WALS_ACCEL_NONE;
}

/* The trial's parameters as jsonb text, NULL exponent as null. */
char *
wals_tune_trial_json(const TuneTrial *t)
{
	return psprintf("{\"factors\": %d, \"regularization\": %.6g, \"regularization_exponent\": %s,"
					" \"unobserved_weight\": %.6g, \"alpha\": %.6g, \"init_std\": %.6g,"
					" \"solver\": \"%s\", \"accelerate\": \"%s\", \"configuration\": %d,"
					" \"max_iterations\": %d}",
					(int) t->v[DIM_FACTORS], t->v[DIM_REGULARIZATION],
					isnan(t->v[DIM_EXPONENT]) ? "null" : psprintf("%.6g", t->v[DIM_EXPONENT]),
					t->v[DIM_UNOBSERVED], t->v[DIM_ALPHA], t->v[DIM_INIT_STD],
					wals_solver_name(wals_tune_trial_solver(t)), wals_accelerate_name(wals_tune_trial_accelerate(t)),
					t->config + 1, t->max_iterations);
}

