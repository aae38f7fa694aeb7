/*
 * tune_internal.h
 *	  What the files of wals_tune share: the space searched, a trial, the
 *	  search under way and the call's arguments.
 */
#ifndef WALS_TUNE_INTERNAL_H
#define WALS_TUNE_INTERNAL_H

#include "portability/instr_time.h"
#include "utils/jsonb.h"

#include "wals_train.h"

/* The iterations a trial may run; early stopping ends most sooner. */
#define TUNE_MAX_ITERATIONS 50
#define TUNE_PATIENCE 2
#define TUNE_CHOICES 16

/* Successive halving: a bracket's configurations, its rounds, the first's iterations. */
#define TUNE_BRACKET 9
#define TUNE_ROUNDS 3
#define TUNE_FIRST_ITERATIONS 3

/* The width from which the subspace solver with ALS-NCG trains a trial. */
#define TUNE_SUBSPACE_FACTORS 512

/* One parameter of the space: a range (log-uniform when min > 0) or choices. */
typedef struct TuneDim
{
	const char *name;
	bool		integer;
	int			nchoices;		/* 0: the range */
	double		choices[TUNE_CHOICES];	/* NaN: NULL */
	double		min;
	double		max;
} TuneDim;

enum
{
	DIM_FACTORS,
	DIM_REGULARIZATION,
	DIM_EXPONENT,
	DIM_UNOBSERVED,
	DIM_ALPHA,
	DIM_INIT_STD,
	NDIMS
};

/* The parameters of one trial, in the order of the dimensions. */
typedef struct TuneTrial
{
	double		v[NDIMS];
	double		score;			/* the metric's value */
	double		rank;			/* higher is better, whatever the metric */
	int			config;			/* the configuration sampled, from 0 */
	int			max_iterations; /* the trial's round's */
	int			best_iteration;
	int			iterations;		/* run */
	double		seconds;
	double		validation_s;	/* of seconds, scoring the validation */
	double		load_s;
	int64		rows;			/* users and items */
} TuneTrial;

/* wals_tune's arguments, checked (tune_call.c). */
typedef struct TuneArgs
{
	char	   *metric;
	double		validation;
	double		budget_s;
	int			seed;
	int			max_trials;
	WalsFeedback feedback;
	bool		lower;			/* the metric is better lower (rmse) */
	WalsModelName mn;			/* the model tuned, its schema resolved */
	char	   *shown;			/* the model as given, for progress */
} TuneArgs;

/* One tuning's search: what every trial needs, and the trials run so far. */
typedef struct TuneRun
{
	const WalsTrainRequest *base;	/* the source, its columns, the seed */
	const char *trial_model;
	const char *shown;
	const char *metric;
	const WalsModelName *mn;	/* the model tuned, its schema resolved */
	bool		lower;			/* better lower (rmse) */
	double		validation;
	instr_time	start;
	double		budget_s;
	int			max_trials;
	int64		tuning;			/* its number in wals_tuning_log */
	bool		commits;		/* wals_tune_concurrently's: a trial a transaction */
	WalsKeptRatings kept;		/* the ratings, read by the first trial */
	TuneTrial  *trials;
	int			n;
	int			best;
} TuneRun;

/* tune_space.c */
extern void wals_tune_default_space(TuneDim *dims, WalsFeedback feedback);
extern void wals_tune_parse_space(Jsonb *space, TuneDim *dims);
extern void wals_tune_sample_trial(const TuneDim *dims, int seed, int t, TuneTrial *trial);
extern WalsSolver wals_tune_trial_solver(const TuneTrial *t);
extern WalsAccelerate wals_tune_trial_accelerate(const TuneTrial *t);
extern char *wals_tune_trial_json(const TuneTrial *t);

/* tune.c */
extern void wals_tune_and_train(TuneRun *run, const TuneDim *dims, int seed, const char *model);

#endif							/* WALS_TUNE_INTERNAL_H */
