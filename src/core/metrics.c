/*
 * metrics.c
 *	  Ranking metrics at k, AUC and RMSE of held-out ratings, one user at a
 *	  time (definitions in wals_metrics.h).
 *
 * The top k comes from wals_topk_select, so that the evaluation ranks
 * exactly as wals_recommend serves: same skip of training items, same ties,
 * same treatment of NaN.
 *
 * AUC over all (relevant, non-relevant) pairs would cost
 * |relevant| x nitems per user, which a user with thousands of held-out
 * items makes quadratic.  Instead the relevant scores are sorted once, in
 * the caller's scratch, and each non-relevant eligible item finds by two
 * binary searches how many relevant scores lie above it and how many equal
 * it.  The count of wins is kept doubled in an integer, so ties add exactly
 * 1 and the fraction is rounded once, at the end.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wals_internal.h"
#include "wals_metrics.h"

/*
 * The order NaN-lowest: a strict weak order, unlike < on floats, so that
 * sorting and searching scores that may be NaN stay well defined.
 */
static inline int
below(float a, float b)
{
	return a < b || (isnan(a) && !isnan(b));
}

static void
sift_down(float *v, int64_t i, int64_t n)
{
	for (;;)
	{
		int64_t		l = 2 * i + 1;
		int64_t		m = i;
		float		t;

		if (l < n && below(v[m], v[l]))
			m = l;
		if (l + 1 < n && below(v[m], v[l + 1]))
			m = l + 1;
		if (m == i)
			return;
		t = v[i];
		v[i] = v[m];
		v[m] = t;
		i = m;
	}
}

/*
 * Ascending heapsort: in place and without allocation, which qsort does
 * not promise, and O(n log n) whatever the input.
 */
static void
sort_scores(float *v, int64_t n)
{
	int64_t		i;

	for (i = n / 2; i > 0; i--)
		sift_down(v, i - 1, n);
	for (i = n - 1; i > 0; i--)
	{
		float		t = v[0];

		v[0] = v[i];
		v[i] = t;
		sift_down(v, 0, i);
	}
}

/* Entries of sorted v[0..n) below s. */
static int64_t
count_below(const float *v, int64_t n, float s)
{
	int64_t		lo = 0;
	int64_t		hi = n;

	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (below(v[mid], s))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Entries of sorted v[0..n) not above s. */
static int64_t
count_not_above(const float *v, int64_t n, float s)
{
	int64_t		lo = 0;
	int64_t		hi = n;

	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (below(s, v[mid]))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static int
contains(const int32_t *sorted, int64_t n, int32_t x)
{
	int64_t		lo = 0;
	int64_t		hi = n;

	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (sorted[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && sorted[lo] == x;
}

/*
 * The number of distinct indices in idx[0..n), or -1 unless they lie in
 * [0, nitems) in increasing order, strictly so when strict.
 */
static int64_t
distinct_indices(const int32_t *idx, int64_t n, int64_t nitems, int strict)
{
	int64_t		distinct = 0;
	int64_t		j;

	if (n < 0 || (n > 0 && idx == NULL))
		return -1;
	for (j = 0; j < n; j++)
	{
		if (idx[j] < 0 || idx[j] >= nitems)
			return -1;
		if (j > 0 && (idx[j] < idx[j - 1] || (strict && idx[j] == idx[j - 1])))
			return -1;
		if (j == 0 || idx[j] != idx[j - 1])
			distinct++;
	}
	return distinct;
}

/*
 * The scores of the relevant items into rel, in test order; returns how
 * many there are.  Both lists are sorted, so one walk finds the test items
 * that are training items.
 */
static int64_t
relevant_scores(const float *scores, const int32_t *train, int64_t ntrain,
				const int32_t *test, int64_t ntest, float *rel)
{
	int64_t		t = 0;
	int64_t		nrel = 0;
	int64_t		j;

	for (j = 0; j < ntest; j++)
	{
		while (t < ntrain && train[t] < test[j])
			t++;
		if (t < ntrain && train[t] == test[j])
			continue;
		rel[nrel++] = scores[test[j]];
	}
	return nrel;
}

/*
 * Twice the number of wins of relevant over non-relevant eligible items, a
 * tie winning half, given the relevant scores sorted by below().  An item
 * in test but not in train is relevant, so the eligible non-relevant items
 * are exactly those in neither list.
 */
static int64_t
auc_twice_wins(const float *scores, int64_t nitems,
			   const int32_t *train, int64_t ntrain,
			   const int32_t *test, int64_t ntest,
			   const float *rel, int64_t nrel)
{
	int64_t		t = 0;
	int64_t		s = 0;
	int64_t		twice = 0;
	int64_t		j;

	for (j = 0; j < nitems; j++)
	{
		int64_t		lower;
		int64_t		not_above;

		while (t < ntrain && train[t] < j)
			t++;
		while (s < ntest && test[s] < j)
			s++;
		if ((t < ntrain && train[t] == j) || (s < ntest && test[s] == j))
			continue;
		lower = count_below(rel, nrel, scores[j]);
		not_above = count_not_above(rel, nrel, scores[j]);
		twice += 2 * (nrel - not_above) + (not_above - lower);
	}
	return twice;
}

/*
 * Relevant items up to which auc_twice_wins_counting serves: its cost is
 * nitems x nrel comparisons without branches, against the sorted form's
 * nitems x 2 log2(nrel) branching ones.
 */
#define AUC_COUNTING_MAX 64

/* 2 if x is below r, 1 if equal, in the order of below(). */
static int
twice_beaten(float x, float r)
{
	return below(x, r) ? 2 : !below(r, x) ? 1 : 0;
}

/*
 * auc_twice_wins by counting, for users with few relevant items (most, in
 * held-out splits): for each relevant score r, the items scored below r
 * and equal to r among all items, by the kernels' rank_counts (a pass of
 * vector comparisons over the scores for each r), then less the items that
 * are not negatives (the distinct training items and the relevant ones).
 * An item scored NaN fails every comparison, so NaN items are counted
 * apart, as the items neither below nor equal to +infinity, and added as
 * below(), which puts NaN below every score and equal to NaN, orders them.
 */
static int64_t
auc_twice_wins_counting(const float *scores, int64_t nitems,
						const int32_t *train, int64_t ntrain,
						const float *rel, int64_t nrel)
{
	const WalsKernels *kernels = wals_kernels();
	const float inf = INFINITY;
	int64_t		lt[AUC_COUNTING_MAX];
	int64_t		eq[AUC_COUNTING_MAX];
	int64_t		twice = 0;
	int64_t		nan_items;
	int64_t		i;
	int64_t		t;
	int64_t		p;

	kernels->rank_counts(scores, nitems, &inf, 1, lt, eq);
	nan_items = nitems - lt[0] - eq[0];
	kernels->rank_counts(scores, nitems, rel, (int) nrel, lt, eq);
	for (p = 0; p < nrel; p++)
		twice += isnan(rel[p]) ? nan_items : 2 * (lt[p] + nan_items) + eq[p];
	for (p = 0; p < nrel; p++)
	{
		for (t = 0; t < ntrain; t++)
			if (t == 0 || train[t] != train[t - 1])
				twice -= twice_beaten(scores[train[t]], rel[p]);
		for (i = 0; i < nrel; i++)
			twice -= twice_beaten(rel[i], rel[p]);
	}
	return twice;
}

static int64_t
min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/*
 * The top-k slots are capped at nitems: wals_topk_select never holds more
 * entries than there are items, so a large k costs no memory.
 */
size_t
wals_metrics_scratch_size(int64_t nitems, int k)
{
	if (k < 1 || nitems < 0)
		return 0;
	return (size_t) nitems * sizeof(float) +
		(size_t) min64(k, nitems) * (sizeof(int32_t) + sizeof(float));
}

WalsStatus
wals_metrics_init(WalsMetricsAcc *acc, int k)
{
	if (k < 1)
		return WALS_EINVAL;
	acc->k = k;
	acc->users = 0;
	acc->auc_users = 0;
	acc->users_without_relevant = 0;
	acc->test_in_train = 0;
	acc->precision_sum = 0.0;
	acc->recall_sum = 0.0;
	acc->ndcg_sum = 0.0;
	acc->map_sum = 0.0;
	acc->auc_sum = 0.0;
	return WALS_OK;
}

/* The relevant test items: those not among the training items. */
static int64_t
count_relevant(const int32_t *train, int64_t ntrain, const int32_t *test, int64_t ntest)
{
	int64_t		t = 0;
	int64_t		nrel = 0;

	for (int64_t j = 0; j < ntest; j++)
	{
		while (t < ntrain && train[t] < test[j])
			t++;
		nrel += !(t < ntrain && train[t] == test[j]);
	}
	return nrel;
}

/*
 * The ranking metrics of a user with nrel > 0 relevant items whose top k,
 * top[0..ntop), holds no training item: a test item there is relevant.
 */
static void
add_ranking(WalsMetricsAcc *acc, const int32_t *top, int ntop,
			const int32_t *test, int64_t ntest, int64_t nrel)
{
	int64_t		m = min64(acc->k, nrel);
	int			hits = 0;
	double		dcg = 0.0;
	double		idcg = 0.0;
	double		ap = 0.0;
	int			r;

	for (r = 1; r <= ntop; r++)
	{
		if (!contains(test, ntest, top[r - 1]))
			continue;
		hits++;
		dcg += 1.0 / log2(r + 1.0);
		ap += (double) hits / r;
	}
	for (r = 1; r <= m; r++)
		idcg += 1.0 / log2(r + 1.0);

	acc->users++;
	acc->precision_sum += (double) hits / acc->k;
	acc->recall_sum += (double) hits / m;
	acc->ndcg_sum += dcg / idcg;
	acc->map_sum += ap / m;
}

/* Every argument is checked before acc is written. */
static WalsStatus
check_user(const WalsMetricsAcc *acc, int64_t nitems, const int32_t *train, int64_t ntrain,
		   const int32_t *test, int64_t ntest, int64_t *ntrain_distinct)
{
	if (acc->k < 1 || nitems < 0 || nitems > INT32_MAX)
		return WALS_EINVAL;
	*ntrain_distinct = distinct_indices(train, ntrain, nitems, 0);
	if (*ntrain_distinct < 0 || distinct_indices(test, ntest, nitems, 1) < 0)
		return WALS_EINVAL;
	return WALS_OK;
}

/*
 * Scratch layout: the relevant scores (at most nitems), then the top k's
 * indices and scores.  A refused user leaves the sums as they were.
 */
WalsStatus
wals_metrics_user(WalsMetricsAcc *acc, const float *scores, int64_t nitems,
				  const int32_t *train, int64_t ntrain,
				  const int32_t *test, int64_t ntest, void *scratch)
{
	int64_t		ktop;
	float	   *rel;
	int32_t    *top_idx;
	float	   *top_score;
	int64_t		ntrain_distinct;
	int64_t		nrel;
	int64_t		nneg;
	int			ntop;
	WalsStatus	st;

	if (nitems > 0 && scores == NULL)
		return WALS_EINVAL;
	st = check_user(acc, nitems, train, ntrain, test, ntest, &ntrain_distinct);
	if (st != WALS_OK)
		return st;

	rel = scratch;
	nrel = relevant_scores(scores, train, ntrain, test, ntest, rel);
	acc->test_in_train += ntest - nrel;
	if (nrel == 0)
	{
		acc->users_without_relevant++;
		return WALS_OK;
	}

	ktop = min64(acc->k, nitems);
	top_idx = (int32_t *) (rel + nitems);
	top_score = (float *) (top_idx + ktop);
	ntop = wals_topk_select(scores, nitems, train, ntrain, (int) ktop,
							top_idx, top_score);
	add_ranking(acc, top_idx, ntop, test, ntest, nrel);

	nneg = nitems - ntrain_distinct - nrel;
	if (nneg > 0)
	{
		int64_t		twice;

		if (nrel <= AUC_COUNTING_MAX)
			twice = auc_twice_wins_counting(scores, nitems, train, ntrain, rel, nrel);
		else
		{
			sort_scores(rel, nrel);
			twice = auc_twice_wins(scores, nitems, train, ntrain, test, ntest, rel, nrel);
		}
		acc->auc_users++;
		acc->auc_sum += (double) twice / (2.0 * (double) nrel * (double) nneg);
	}
	/* the top k and AUC's counts: a few passes over every item's score */
	wals_poll((int64_t) 8 * nitems);
	return WALS_OK;
}

WalsStatus
wals_metrics_user_ranked(WalsMetricsAcc *acc, const int32_t *top, int ntop,
						 int64_t nitems, const int32_t *train, int64_t ntrain,
						 const int32_t *test, int64_t ntest)
{
	int64_t		ntrain_distinct;
	int64_t		nrel;
	WalsStatus	st;

	st = check_user(acc, nitems, train, ntrain, test, ntest, &ntrain_distinct);
	if (st != WALS_OK)
		return st;
	if (ntop < 0 || ntop > acc->k || (ntop > 0 && top == NULL))
		return WALS_EINVAL;
	nrel = count_relevant(train, ntrain, test, ntest);
	acc->test_in_train += ntest - nrel;
	if (nrel == 0)
	{
		acc->users_without_relevant++;
		return WALS_OK;
	}
	add_ranking(acc, top, ntop, test, ntest, nrel);
	return WALS_OK;
}

void
wals_metrics_merge(WalsMetricsAcc *acc, const WalsMetricsAcc *part)
{
	acc->users += part->users;
	acc->auc_users += part->auc_users;
	acc->users_without_relevant += part->users_without_relevant;
	acc->test_in_train += part->test_in_train;
	acc->precision_sum += part->precision_sum;
	acc->recall_sum += part->recall_sum;
	acc->ndcg_sum += part->ndcg_sum;
	acc->map_sum += part->map_sum;
	acc->auc_sum += part->auc_sum;
}

static double
mean(double sum, int64_t n)
{
	return n > 0 ? sum / (double) n : NAN;
}

void
wals_metrics_finish(const WalsMetricsAcc *acc, WalsMetrics *out)
{
	out->precision = mean(acc->precision_sum, acc->users);
	out->recall = mean(acc->recall_sum, acc->users);
	out->ndcg = mean(acc->ndcg_sum, acc->users);
	out->map = mean(acc->map_sum, acc->users);
	out->auc = mean(acc->auc_sum, acc->auc_users);
	out->users = acc->users;
	out->auc_users = acc->auc_users;
	out->users_without_relevant = acc->users_without_relevant;
	out->test_in_train = acc->test_in_train;
}

void
wals_rmse_init(WalsRmseAcc *acc)
{
	acc->sse = 0.0;
	acc->cells = 0;
}

/* Two passes: the first refuses bad input before any sum is touched. */
WalsStatus
wals_rmse_user(WalsRmseAcc *acc, const float *scores, int64_t nitems,
			   const int32_t *test, const float *ratings, int64_t ntest)
{
	double		sse = 0.0;
	int64_t		j;

	if (ntest < 0 || (ntest > 0 && (scores == NULL || test == NULL ||
									ratings == NULL)))
		return WALS_EINVAL;
	for (j = 0; j < ntest; j++)
		if (test[j] < 0 || test[j] >= nitems)
			return WALS_EINVAL;
	for (j = 0; j < ntest; j++)
		if (!isfinite(ratings[j]) || !isfinite(scores[test[j]]))
			return WALS_ENONFINITE;
	for (j = 0; j < ntest; j++)
	{
		double		e = (double) ratings[j] - scores[test[j]];

		sse += e * e;
	}
	acc->sse += sse;
	acc->cells += ntest;
	return WALS_OK;
}

void
wals_rmse_merge(WalsRmseAcc *acc, const WalsRmseAcc *part)
{
	acc->sse += part->sse;
	acc->cells += part->cells;
}

double
wals_rmse_finish(const WalsRmseAcc *acc)
{
	return acc->cells > 0 ? sqrt(acc->sse / (double) acc->cells) : NAN;
}

/* The metrics ranked at k, by the prefix of their names; "auc" is the other. */
static const struct
{
	const char *prefix;
	WalsMetricKind kind;
}			ranked[] = {
	{"precision@", WALS_METRIC_PRECISION},
	{"recall@", WALS_METRIC_RECALL},
	{"ndcg@", WALS_METRIC_NDCG},
	{"map@", WALS_METRIC_MAP},
};

void
wals_metric_name(WalsMetricKind kind, int k, char *buf, size_t size)
{
	for (size_t i = 0; i < sizeof(ranked) / sizeof(ranked[0]); i++)
		if (ranked[i].kind == kind)
		{
			snprintf(buf, size, "%s%d", ranked[i].prefix, k);
			return;
		}
	snprintf(buf, size, kind == WALS_METRIC_RMSE ? "rmse" : "auc");
}

int
wals_metric_parse(const char *name, int max_k, WalsMetricKind *kind, int *k)
{
	if (strcmp(name, "auc") == 0 || strcmp(name, "rmse") == 0)
	{
		*kind = name[0] == 'a' ? WALS_METRIC_AUC : WALS_METRIC_RMSE;
		*k = 1;
		return 1;
	}
	for (size_t i = 0; i < sizeof(ranked) / sizeof(ranked[0]); i++)
	{
		size_t		len = strlen(ranked[i].prefix);
		const char *digits = name + len;
		char	   *end;
		long		v;

		if (strncmp(name, ranked[i].prefix, len) != 0)
			continue;
		/* digits only: strtol would take a sign or spaces */
		if (*digits < '0' || *digits > '9')
			return 0;
		v = strtol(digits, &end, 10);
		if (*end != '\0' || v < 1 || v > max_k)
			return 0;
		*kind = ranked[i].kind;
		*k = (int) v;
		return 1;
	}
	return 0;
}

double
wals_metric_value(const WalsMetrics *m, WalsMetricKind kind)
{
	double		v = kind == WALS_METRIC_PRECISION ? m->precision :
		kind == WALS_METRIC_RECALL ? m->recall :
		kind == WALS_METRIC_NDCG ? m->ndcg :
		kind == WALS_METRIC_MAP ? m->map : m->auc;

	return isnan(v) ? 0.0 : v;
}
