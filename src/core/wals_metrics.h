/*
 * wals_metrics.h
 *	  Held-out evaluation of a model, for wals_evaluate: ranking metrics at
 *	  k, AUC and the RMSE of explicit models, without PostgreSQL.
 *
 * The caller scores one test user at a time over every item (scores[i] is
 * the user's score of item i, indexed like the model's item matrix), passes
 * the user's training items and test items as sorted item indices, and
 * accumulates over users; the finish functions turn the sums into means.
 * The accumulators hold plain sums and counts, so the caller may also add
 * up the fields of accumulators filled over disjoint sets of users.
 *
 * Definitions, per user:
 *
 *	  eligible   every item except the user's training items, which can
 *	             never be recommended.
 *	  relevant   the test items that are eligible.  A test item that is also
 *	             a training item is dropped: it could never be a hit, and
 *	             keeping it would only lower recall and ndcg by an amount that
 *	             depends on how the data were split.  Such items are counted
 *	             in test_in_train.  (ref_wals.py keeps them in its
 *	             denominators; its "precision@10", hits / min(10, |relevant|),
 *	             is our recall@10 on splits where no test item is in
 *	             training.)
 *	  ranking    the eligible items by score, highest first, ties to the
 *	             lower index, as wals_topk_select and wals_recommend order
 *	             them.  A NaN score ranks below every other score, -Inf
 *	             included; since wals_topk_select never returns a NaN score,
 *	             an item scored NaN is never a hit, and the top k may hold
 *	             fewer than k items.
 *	  m          min(k, |relevant|), the most hits the user can have.
 *	  hit        a relevant item among the first k of the ranking; rank r
 *	             counts from 1.
 *
 *	  precision@k = hits / k, k even when fewer than k items are eligible
 *	  recall@k    = hits / m (so 1 is reachable whatever |relevant| is, as in
 *	                the iALS benchmarks of Rendle et al.)
 *	  ndcg@k      = DCG / IDCG with binary gains: DCG = sum over hits of
 *	                1 / log2(r + 1), IDCG = the same sum over r = 1 .. m
 *	  map@k       = (1 / m) sum over hits of precision@r, that is
 *	                (hits within ranks 1 .. r) / r at the hit's rank r
 *	  auc         = over the pairs (p, q) of a relevant item p and an eligible
 *	                item q that is not relevant, the fraction where p scores
 *	                higher than q, a tie counting 1/2; NaN is below every
 *	                other score and equal to NaN.  Undefined for a user whose
 *	                eligible items are all relevant.
 *
 * A user with no relevant item is not evaluated (users_without_relevant
 * counts them).  precision, recall, ndcg and map are means over the users
 * evaluated, auc the mean over those of them with at least one eligible item
 * that is not relevant (auc_users).
 *
 * rmse = sqrt(mean over every test cell of (rating - score)^2), pooled over
 * the cells of all users rather than averaged per user, so that it is the
 * RMSE of the whole test set as ref_wals.py and Spark compute it.  Every test
 * cell counts, those also in training included: a rating prediction is
 * defined wherever the model has both factors.  Meaningful for explicit
 * models, whose scores predict ratings.
 */
#ifndef WALS_METRICS_H
#define WALS_METRICS_H

#include "wals_core.h"
#include "wals_score.h"

/* Sums over the users evaluated so far; wals_metrics_user writes them. */
typedef struct WalsMetricsAcc
{
	int			k;
	int64_t		users;			/* users with at least one relevant item */
	int64_t		auc_users;		/* of them, those with an eligible item that
								 * is not relevant */
	int64_t		users_without_relevant;
	int64_t		test_in_train;	/* test items dropped as training items */
	double		precision_sum;
	double		recall_sum;
	double		ndcg_sum;
	double		map_sum;
	double		auc_sum;
} WalsMetricsAcc;

/* The means; NaN where no user counts towards one. */
typedef struct WalsMetrics
{
	double		precision;
	double		recall;
	double		ndcg;
	double		map;
	double		auc;
	int64_t		users;
	int64_t		auc_users;
	int64_t		users_without_relevant;
	int64_t		test_in_train;
} WalsMetrics;

/* Sums over the test cells seen so far; wals_rmse_user writes them. */
typedef struct WalsRmseAcc
{
	double		sse;			/* sum of (rating - score)^2 */
	int64_t		cells;
} WalsRmseAcc;

/*
 * Bytes of scratch wals_metrics_user needs for users of nitems items at
 * this k, aligned as malloc aligns; 0 for a k below 1 or a negative nitems,
 * which it refuses.  One buffer serves every user of an evaluation.
 */
extern size_t wals_metrics_scratch_size(int64_t nitems, int k);

/* An empty accumulator for metrics at k; WALS_EINVAL for k < 1. */
extern WalsStatus wals_metrics_init(WalsMetricsAcc *acc, int k);

/*
 * Add one user: scores[0..nitems), the training items train[0..ntrain)
 * (increasing, repeats allowed) and the test items test[0..ntest) (strictly
 * increasing).  WALS_EINVAL, with acc unchanged, for nitems outside
 * [0, INT32_MAX], an index outside [0, nitems) or indices out of order.
 * Costs O(nitems log k + (nitems + |relevant|) log |relevant|).
 */
extern WalsStatus wals_metrics_user(WalsMetricsAcc *acc, const float *scores,
									int64_t nitems, const int32_t *train,
									int64_t ntrain, const int32_t *test,
									int64_t ntest, void *scratch);

/*
 * Add one user's ranking metrics from its top k alone, top[0..ntop) as
 * wals_topk_select (or wals_score_topk, wals_metrics_user's ranking when
 * the scores are wals_score_dot's) returns it: the same sums as
 * wals_metrics_user from the scores that ranked them, except AUC, which
 * needs every score and is left out (auc_users is not counted).  Refuses
 * what wals_metrics_user refuses, and ntop outside [0, k].
 */
extern WalsStatus wals_metrics_user_ranked(WalsMetricsAcc *acc, const int32_t *top,
										   int ntop, int64_t nitems,
										   const int32_t *train, int64_t ntrain,
										   const int32_t *test, int64_t ntest);

/*
 * Add part's sums to acc.  Accumulators of one user each, merged in user
 * order, give the sums of one accumulator that saw those users in that
 * order, to the bit: a one-user sum is its term exactly.
 */
extern void wals_metrics_merge(WalsMetricsAcc *acc, const WalsMetricsAcc *part);

extern void wals_metrics_finish(const WalsMetricsAcc *acc, WalsMetrics *out);

extern void wals_rmse_init(WalsRmseAcc *acc);

/*
 * Add one user's test cells: item test[j] rated ratings[j], for j < ntest,
 * in any order.  WALS_EINVAL for an index outside [0, nitems),
 * WALS_ENONFINITE for a rating or a score of a test item that is NaN or
 * infinite; either leaves acc unchanged.
 */
extern WalsStatus wals_rmse_user(WalsRmseAcc *acc, const float *scores,
								 int64_t nitems, const int32_t *test,
								 const float *ratings, int64_t ntest);

/* The pooled RMSE; NaN when no cell was added. */
extern double wals_rmse_finish(const WalsRmseAcc *acc);

/* Add the sums of part, one user's or a process's, into acc. */
extern void wals_rmse_merge(WalsRmseAcc *acc, const WalsRmseAcc *part);

/* One of the ranking metrics above, by name. */
typedef enum WalsMetricKind
{
	WALS_METRIC_PRECISION,
	WALS_METRIC_RECALL,
	WALS_METRIC_NDCG,
	WALS_METRIC_MAP,
	WALS_METRIC_AUC,
	WALS_METRIC_RMSE			/* of explicit ratings; lower is better */
} WalsMetricKind;

/*
 * Parse "precision@k", "recall@k", "ndcg@k", "map@k" (k a decimal number
 * from 1 to max_k), "auc" or "rmse" (k set to 1: AUC ranks every item
 * whatever k is, RMSE ranks none).  0 for anything else.
 */
extern int	wals_metric_parse(const char *name, int max_k, WalsMetricKind *kind, int *k);

/* The name of metric kind at k, as wals_metric_parse reads it, into buf. */
extern void wals_metric_name(WalsMetricKind kind, int k, char *buf, size_t size);

/* The mean of that ranking metric in m, 0 where no user counted towards it. */
extern double wals_metric_value(const WalsMetrics *m, WalsMetricKind kind);

/* Whether a lower value of metric kind is the better one (RMSE). */
static inline int
wals_metric_lower_better(WalsMetricKind kind)
{
	return kind == WALS_METRIC_RMSE;
}

/*
 * Validation: the metrics at k (above) of the user factors X and the item
 * factors of ix (wals_score.h) on held-out cells (holdout.c), each user's
 * training cells (train, by user) left out of its ranking as wals_evaluate
 * leaves them out.  Without with_auc the ranking is wals_score_topk's,
 * exactly what wals_recommend serves, from the index's int8 first pass and
 * exact rescoring, and AUC is not computed; with it every item is scored
 * in float by a matrix product and every metric comes from those scores.
 */

/* Users scored together: in one matrix product, or sharing the first pass. */
#define WALS_HOLDOUT_BLOCK 64

/* The users it evaluates: at most max_users (0: all) of those with held cells, evenly spread. */
extern int64_t wals_holdout_pick(const WalsCsr *held_cells, int64_t max_users, int64_t *users);

/*
 * Bytes of scratch of wals_holdout_score and wals_holdout_metrics over
 * nitems items of f factors, any alignment.
 */
extern size_t wals_holdout_scratch(int64_t nitems, int f, int k, int with_auc);

/*
 * users[0..n) (rows of X and train) into parts[0..n), an accumulator of one
 * user each, which wals_metrics_merge adds up in order.
 */
extern WalsStatus wals_holdout_score(const WalsScoreIndex *ix, const float *X,
									 const WalsCsr *train, const WalsCsr *held_cells,
									 const int64_t *users, int64_t n, int k, int with_auc,
									 void *scratch, WalsMetricsAcc *parts);

/*
 * The RMSE of x_u·y_i against the rating of every held-out cell (all users,
 * held_cells' values), into *rmse (NaN without a cell).
 */
extern WalsStatus wals_holdout_rmse(const float *X, const float *Y, int f,
									const WalsCsr *held_cells, double *rmse);

/* The whole validation over wals_holdout_pick's users, in one process. */
extern WalsStatus wals_holdout_metrics(const WalsScoreIndex *ix, const float *X,
									   const WalsCsr *train, const WalsCsr *held_cells,
									   int k, int with_auc, int64_t max_users, void *scratch,
									   WalsMetrics *out);

#endif							/* WALS_METRICS_H */
