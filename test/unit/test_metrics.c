/*
 * test_metrics.c
 *	  Evaluation metrics: small users worked out by hand, the edge cases
 *	  wals_evaluate meets (ties, k past the eligible items, test items all in
 *	  training, NaN scores, bad arguments), and random users against a full
 *	  sort and an all-pairs AUC.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "wals_metrics.h"

#define GUARD 64

static int
near(double got, double want)
{
	return fabs(got - want) <= 1e-12 * (1.0 + fabs(want));
}

/*
 * The scratch is exactly the advertised size, followed by a guard that
 * must survive, so an overrun of wals_metrics_scratch_size fails here.
 */
static WalsStatus
add_user(WalsMetricsAcc *acc, const float *scores, int64_t n,
		 const int32_t *train, int64_t ntrain,
		 const int32_t *test, int64_t ntest)
{
	size_t		bytes = wals_metrics_scratch_size(n, acc->k);
	unsigned char *buf = test_alloc(bytes + GUARD, 1);
	int			intact = 1;
	size_t		j;
	WalsStatus	st;

	memset(buf, 0xa5, bytes + GUARD);
	st = wals_metrics_user(acc, scores, n, train, ntrain, test, ntest, buf);
	for (j = bytes; j < bytes + GUARD; j++)
		intact &= buf[j] == 0xa5;
	CHECK(intact, "scratch written past its %zu bytes", bytes);
	free(buf);
	return st;
}

/* The metrics of a single user. */
static WalsStatus
one_user(int k, const float *scores, int64_t n, const int32_t *train,
		 int64_t ntrain, const int32_t *test, int64_t ntest, WalsMetrics *out)
{
	WalsMetricsAcc acc;
	WalsStatus	st;

	wals_metrics_init(&acc, k);
	st = add_user(&acc, scores, n, train, ntrain, test, ntest);
	wals_metrics_finish(&acc, out);
	return st;
}

static void
check_metrics(const char *what, const WalsMetrics *got, double precision,
			  double recall, double ndcg, double map, double auc)
{
	CHECK(near(got->precision, precision), "%s: precision %.15g, want %.15g",
		  what, got->precision, precision);
	CHECK(near(got->recall, recall), "%s: recall %.15g, want %.15g",
		  what, got->recall, recall);
	CHECK(near(got->ndcg, ndcg), "%s: ndcg %.15g, want %.15g",
		  what, got->ndcg, ndcg);
	CHECK(near(got->map, map), "%s: map %.15g, want %.15g",
		  what, got->map, map);
	CHECK(isnan(auc) ? isnan(got->auc) : near(got->auc, auc),
		  "%s: auc %.15g, want %.15g", what, got->auc, auc);
}

static void
test_by_hand(void)
{
	/*
	 * User A, k = 3.  Item 1 is in training, so the ranking is items
	 * 0 2 3 4 5 6 7 and the top 3 is 0 2 3.  Relevant {0, 3, 6}: hits at
	 * ranks 1 and 3.
	 *	 precision = 2/3, recall = 2/min(3, 3) = 2/3
	 *	 DCG = 1/log2(2) + 1/log2(4) = 1.5
	 *	 IDCG = 1/log2(2) + 1/log2(3) + 1/log2(4) = 1.5 + 1/log2(3)
	 *	 map = (1/3) (1/1 + 2/3) = 5/9
	 *	 auc: negatives 2 4 5 7 (0.7 0.5 0.4 0.2); item 0 (0.9) beats 4, item
	 *	 3 (0.6) beats 3, item 6 (0.3) beats 1: 8/12 = 2/3
	 */
	float		sa[] = {0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f, 0.3f, 0.2f};
	int32_t		ta[] = {1};
	int32_t		ea[] = {0, 3, 6};
	double		ndcg_a = 1.5 / (1.5 + 1.0 / log2(3.0));

	/*
	 * User B, k = 3 as it shares A's accumulator.  Test item 0 is also in
	 * training: dropped, so relevant = {4}.  Items 1, 2 and 4 tie at 1: the
	 * ranking is 1 2 4 3, and the top 3 holds item 4 at rank 3.
	 *	 precision = 1/3, recall = 1/min(3, 1) = 1
	 *	 ndcg = (1/log2(4)) / (1/log2(2)) = 1/2
	 *	 map = (1/1) (1/3) = 1/3
	 *	 auc: item 4 (1) against 1 (1, tie), 2 (1, tie), 3 (0, win):
	 *	 (0.5 + 0.5 + 1)/3 = 2/3
	 * Means of A and B: precision (2/3 + 1/3)/2 = 1/2, recall
	 * (2/3 + 1)/2 = 5/6, ndcg (ndcg_a + 1/2)/2, map (5/9 + 1/3)/2 = 4/9,
	 * auc 2/3.
	 */
	float		sb[] = {1.0f, 1.0f, 1.0f, 0.0f, 1.0f};
	int32_t		tb[] = {0};
	int32_t		eb[] = {0, 4};

	/*
	 * User C, k = 4, no training items, scores falling with the index: the
	 * top 4 is 0 1 2 3 and relevant {1, 2, 5} hits at ranks 2 and 3.
	 *	 precision = 2/4, recall = 2/min(4, 3) = 2/3
	 *	 DCG = 1/log2(3) + 1/log2(4); IDCG = 1 + 1/log2(3) + 1/log2(4)
	 *	 map = (1/3) (1/2 + 2/3) = 7/18
	 *	 auc: negatives 0 3 4 (6 3 2); item 1 (5) and item 2 (4) beat two
	 *	 each, item 5 (1) none: 4/9
	 */
	float		sc[] = {6.0f, 5.0f, 4.0f, 3.0f, 2.0f, 1.0f};
	int32_t		ec[] = {1, 2, 5};
	double		dcg_c = 1.0 / log2(3.0) + 0.5;

	WalsMetricsAcc acc;
	WalsMetrics out;
	WalsStatus	st;

	st = one_user(3, sa, 8, ta, 1, ea, 3, &out);
	CHECK(st == WALS_OK && out.users == 1 && out.auc_users == 1,
		  "user A: status %d, %lld users", (int) st, (long long) out.users);
	check_metrics("user A", &out, 2.0 / 3, 2.0 / 3, ndcg_a, 5.0 / 9, 2.0 / 3);

	st = one_user(3, sb, 5, tb, 1, eb, 2, &out);
	CHECK(st == WALS_OK && out.test_in_train == 1,
		  "user B: one test item in training, counted %lld",
		  (long long) out.test_in_train);
	check_metrics("user B", &out, 1.0 / 3, 1.0, 0.5, 1.0 / 3, 2.0 / 3);

	wals_metrics_init(&acc, 3);
	add_user(&acc, sa, 8, ta, 1, ea, 3);
	add_user(&acc, sb, 5, tb, 1, eb, 2);
	wals_metrics_finish(&acc, &out);
	CHECK(out.users == 2 && out.auc_users == 2 && out.test_in_train == 1 &&
		  out.users_without_relevant == 0,
		  "A and B: counts %lld %lld %lld %lld",
		  (long long) out.users, (long long) out.auc_users,
		  (long long) out.test_in_train,
		  (long long) out.users_without_relevant);
	check_metrics("means of A and B", &out, 0.5, 5.0 / 6, (ndcg_a + 0.5) / 2,
				  4.0 / 9, 2.0 / 3);

	one_user(4, sc, 6, NULL, 0, ec, 3, &out);
	check_metrics("user C", &out, 0.5, 2.0 / 3, dcg_c / (1.0 + dcg_c),
				  7.0 / 18, 4.0 / 9);
}

static void
test_edges(void)
{
	float		tie[] = {0.5f, 0.5f};
	int32_t		first[] = {0};
	int32_t		second[] = {1};
	float		few[] = {0.1f, 0.4f, 0.3f, 0.2f};
	int32_t		few_train[] = {1};
	int32_t		few_test[] = {3};
	int32_t		gone_train[] = {0, 2};
	int32_t		gone_test[] = {2};
	float		nonneg[] = {0.3f, 0.1f, 0.2f};
	int32_t		nonneg_test[] = {1, 2};
	WalsMetrics out;
	WalsStatus	st;

	/*
	 * Two items tied at 0.5, k = 1: the lower index takes the only place.
	 * Relevant {1}: no hit, and auc 1/2 from the tie.  Relevant {0}: a hit
	 * at rank 1, every ranking metric 1.
	 */
	one_user(1, tie, 2, NULL, 0, second, 1, &out);
	check_metrics("tie lost at the cut", &out, 0, 0, 0, 0, 0.5);
	one_user(1, tie, 2, NULL, 0, first, 1, &out);
	check_metrics("tie won at the cut", &out, 1, 1, 1, 1, 0.5);

	/*
	 * k = 10 over 3 eligible items (item 1 in training): the ranking is
	 * 2 (0.3) 3 (0.2) 0 (0.1) and relevant {3} hits at rank 2.
	 *	 precision = 1/10 (k, not the 3 eligible), recall = 1/min(10, 1) = 1
	 *	 ndcg = (1/log2(3)) / 1, map = (1/1) (1/2) = 1/2
	 *	 auc: 0.2 beats 0.1, loses to 0.3: 1/2
	 */
	st = one_user(10, few, 4, few_train, 1, few_test, 1, &out);
	CHECK(st == WALS_OK, "k past the eligible items: status %d", (int) st);
	check_metrics("k past the eligible items", &out, 0.1, 1, 1.0 / log2(3.0),
				  0.5, 0.5);

	/* The only test item is in training: no user evaluated, all means NaN. */
	st = one_user(3, few, 4, gone_train, 2, gone_test, 1, &out);
	CHECK(st == WALS_OK && out.users == 0 && out.users_without_relevant == 1 &&
		  out.test_in_train == 1 && out.auc_users == 0,
		  "test items all in training: %lld users, %lld without relevant",
		  (long long) out.users, (long long) out.users_without_relevant);
	CHECK(isnan(out.precision) && isnan(out.recall) && isnan(out.ndcg) &&
		  isnan(out.map) && isnan(out.auc), "no user: means are NaN");
	one_user(3, few, 4, NULL, 0, NULL, 0, &out);
	CHECK(out.users == 0 && out.users_without_relevant == 1,
		  "no test items: not evaluated");

	/*
	 * Item 0 in training and both others relevant: ranking 2 1, two hits,
	 * every ranking metric 1 (map = (1/2)(1/1 + 2/2)), and no negative to
	 * pair with, so auc leaves this user out.
	 */
	one_user(2, nonneg, 3, first, 1, nonneg_test, 2, &out);
	CHECK(out.users == 1 && out.auc_users == 0, "no negatives: %lld auc users",
		  (long long) out.auc_users);
	check_metrics("no negatives", &out, 1, 1, 1, 1, NAN);
}

static void
test_nan(void)
{
	/*
	 * NaN ranks last: the top 3 is 1 (0.5) 3 (0.2) 4 (-Inf), and relevant
	 * {0, 3} hits once, item 3 at rank 2; item 0, scored NaN, cannot hit.
	 *	 precision = 1/3, recall = 1/min(3, 2) = 1/2
	 *	 ndcg = (1/log2(3)) / (1 + 1/log2(3)), map = (1/2)(1/2) = 1/4
	 *	 auc over relevant {0 (NaN), 3 (0.2)} x negatives {1 (0.5), 2 (NaN),
	 *	 4 (-Inf)}: item 0 loses to 1, ties 2, loses to 4 (NaN is below
	 *	 -Inf); item 3 loses to 1, beats 2 and 4: (0.5 + 2)/6 = 5/12
	 * At k = 5 the top holds only the three items not NaN: item 0 still
	 * misses, precision = 1/5 and recall = 1/min(5, 2) = 1/2.
	 */
	float		scores[] = {NAN, 0.5f, NAN, 0.2f, -INFINITY};
	int32_t		test[] = {0, 3};
	float		all_nan[] = {NAN, NAN, NAN};
	int32_t		one[] = {1};
	double		d = 1.0 / log2(3.0);
	WalsMetrics out;

	one_user(3, scores, 5, NULL, 0, test, 2, &out);
	check_metrics("NaN scores", &out, 1.0 / 3, 0.5, d / (1.0 + d), 0.25,
				  5.0 / 12);
	one_user(5, scores, 5, NULL, 0, test, 2, &out);
	check_metrics("NaN scores, k = 5", &out, 0.2, 0.5, d / (1.0 + d), 0.25,
				  5.0 / 12);

	/* Nothing can be recommended: no hit; NaN ties NaN, so auc 1/2. */
	one_user(2, all_nan, 3, NULL, 0, one, 1, &out);
	check_metrics("all NaN", &out, 0, 0, 0, 0, 0.5);
}

/* Each refused call names what is wrong with it. */
typedef struct BadUser
{
	const char *what;
	int64_t		nitems;
	const int32_t *train;
	int64_t		ntrain;
	const int32_t *test;
	int64_t		ntest;
} BadUser;

static void
test_errors(void)
{
	static const float scores[] = {0.1f, 0.2f, 0.3f, 0.4f};
	static const int32_t ok_train[] = {1, 1, 2};
	static const int32_t ok_test[] = {0, 3};
	static const int32_t past_end[] = {4};
	static const int32_t negative[] = {-1};
	static const int32_t unsorted[] = {3, 0};
	static const int32_t repeated[] = {2, 2};
	static const BadUser bad[] = {
		{"test index = nitems", 4, NULL, 0, past_end, 1},
		{"negative test index", 4, NULL, 0, negative, 1},
		{"training index = nitems", 4, past_end, 1, ok_test, 2},
		{"negative training index", 4, negative, 1, ok_test, 2},
		{"unsorted test items", 4, NULL, 0, unsorted, 2},
		{"repeated test item", 4, NULL, 0, repeated, 2},
		{"unsorted training items", 4, unsorted, 2, ok_test, 2},
		{"negative nitems", -1, NULL, 0, NULL, 0},
		{"negative ntrain", 4, NULL, -1, ok_test, 2},
		{"negative ntest", 4, NULL, 0, ok_test, -1},
	};
	unsigned char scratch[64];
	WalsMetricsAcc acc;
	WalsMetricsAcc before;
	size_t		j;

	CHECK(wals_metrics_init(&acc, 0) == WALS_EINVAL, "k = 0 refused");
	CHECK(wals_metrics_init(&acc, -2) == WALS_EINVAL, "k < 0 refused");
	CHECK(wals_metrics_scratch_size(4, 0) == 0 &&
		  wals_metrics_scratch_size(-1, 3) == 0,
		  "no scratch for refused arguments");
	CHECK(wals_metrics_scratch_size(10, 3) == 10 * 4 + 3 * 8 &&
		  wals_metrics_scratch_size(10, 100) == 10 * 4 + 10 * 8,
		  "scratch: nitems floats and min(k, nitems) top-k pairs");

	wals_metrics_init(&acc, 2);
	CHECK(add_user(&acc, scores, 4, ok_train, 3, ok_test, 2) == WALS_OK,
		  "repeats in the training items are accepted");
	before = acc;
	for (j = 0; j < sizeof(bad) / sizeof(bad[0]); j++)
	{
		WalsStatus	st = wals_metrics_user(&acc, scores, bad[j].nitems,
										   bad[j].train, bad[j].ntrain,
										   bad[j].test, bad[j].ntest, scratch);

		CHECK(st == WALS_EINVAL, "%s: status %d", bad[j].what, (int) st);
	}
	CHECK(memcmp(&acc, &before, sizeof(acc)) == 0,
		  "a refused user changes nothing");
}

static void
test_rmse(void)
{
	/*
	 * scores 1 2 3: cells (item 2, rating 3.5) and (0, 2) of one user,
	 * (1, 5) of another, errors 0.5, 1 and 3: sqrt((0.25 + 1 + 9)/3)
	 * pooled, where the mean of per-user RMSEs would be
	 * (sqrt(0.625) + 3)/2.
	 */
	float		s[] = {1.0f, 2.0f, 3.0f};
	int32_t		a_items[] = {2, 0};
	float		a_ratings[] = {3.5f, 2.0f};
	int32_t		b_items[] = {1};
	float		b_ratings[] = {5.0f};
	float		nan_scores[] = {0.1f, NAN, 0.3f, 0.4f};
	int32_t		cells[] = {3, 0};
	int32_t		nan_cells[] = {3, 1};
	int32_t		past_end[] = {4};
	int32_t		negative[] = {-1};
	float		ratings[] = {1.0f, 2.0f};
	float		infinite[] = {1.0f, INFINITY};
	WalsRmseAcc acc;
	WalsRmseAcc before;
	double		got;

	wals_rmse_init(&acc);
	CHECK(isnan(wals_rmse_finish(&acc)), "rmse of no cell is NaN");
	CHECK(wals_rmse_user(&acc, s, 3, a_items, a_ratings, 2) == WALS_OK &&
		  wals_rmse_user(&acc, s, 3, b_items, b_ratings, 1) == WALS_OK &&
		  wals_rmse_user(&acc, s, 3, NULL, NULL, 0) == WALS_OK,
		  "rmse cells accepted");
	got = wals_rmse_finish(&acc);
	CHECK(acc.cells == 3 && near(got, sqrt(10.25 / 3)),
		  "rmse pooled %.15g, want %.15g", got, sqrt(10.25 / 3));

	before = acc;
	CHECK(wals_rmse_user(&acc, nan_scores, 4, past_end, ratings, 1) ==
		  WALS_EINVAL, "rmse: index = nitems refused");
	CHECK(wals_rmse_user(&acc, nan_scores, 4, negative, ratings, 1) ==
		  WALS_EINVAL, "rmse: negative index refused");
	CHECK(wals_rmse_user(&acc, nan_scores, 4, nan_cells, ratings, 2) ==
		  WALS_ENONFINITE, "rmse: NaN score refused");
	CHECK(wals_rmse_user(&acc, nan_scores, 4, cells, infinite, 2) ==
		  WALS_ENONFINITE, "rmse: infinite rating refused");
	CHECK(memcmp(&acc, &before, sizeof(acc)) == 0,
		  "a refused rmse user changes nothing");
	CHECK(wals_rmse_user(&acc, nan_scores, 4, cells, ratings, 2) == WALS_OK,
		  "rmse: a NaN score outside the test cells is not read");
}

/* Brute-force order of the ranking: NaN last, then score down, index up. */
static const float *cmp_scores;

static int
cmp_rank(const void *a, const void *b)
{
	int32_t		i = *(const int32_t *) a;
	int32_t		j = *(const int32_t *) b;
	float		si = cmp_scores[i];
	float		sj = cmp_scores[j];

	if (isnan(si) != isnan(sj))
		return isnan(si) ? 1 : -1;
	if (!isnan(si) && si != sj)
		return si > sj ? -1 : 1;
	return (i > j) - (i < j);
}

/* Win of a relevant score p over a negative q: NaN lowest, NaN ties NaN. */
static double
pair_win(float p, float q)
{
	if (isnan(p) || isnan(q))
		return isnan(p) ? (isnan(q) ? 0.5 : 0.0) : 1.0;
	return p > q ? 1.0 : (p == q ? 0.5 : 0.0);
}

typedef struct BruteSums
{
	int64_t		users;
	int64_t		auc_users;
	int64_t		without;
	int64_t		in_train;
	double		precision;
	double		recall;
	double		ndcg;
	double		map;
	double		auc;
} BruteSums;

/*
 * One user straight from the definitions: every eligible item sorted, the
 * first k read off with NaN never a hit, and AUC over every pair.
 */
static void
brute_user(BruteSums *b, int k, const float *scores, int n,
		   const unsigned char *in_train, const unsigned char *in_test)
{
	int32_t    *ranked = test_alloc(n, sizeof(int32_t));
	int			neligible = 0;
	int			nrel = 0;
	int			hits = 0;
	int			m;
	double		dcg = 0.0;
	double		idcg = 0.0;
	double		ap = 0.0;
	double		wins = 0.0;
	int64_t		pairs = 0;
	int			i;
	int			j;
	int			r;

	for (i = 0; i < n; i++)
	{
		b->in_train += in_test[i] && in_train[i];
		if (in_train[i])
			continue;
		ranked[neligible++] = i;
		nrel += in_test[i];
	}
	if (nrel == 0)
	{
		b->without++;
		free(ranked);
		return;
	}
	cmp_scores = scores;
	qsort(ranked, neligible, sizeof(int32_t), cmp_rank);
	for (r = 1; r <= k && r <= neligible; r++)
		if (in_test[ranked[r - 1]] && !isnan(scores[ranked[r - 1]]))
		{
			hits++;
			dcg += 1.0 / log2(r + 1.0);
			ap += (double) hits / r;
		}
	m = k < nrel ? k : nrel;
	for (r = 1; r <= m; r++)
		idcg += 1.0 / log2(r + 1.0);
	b->users++;
	b->precision += (double) hits / k;
	b->recall += (double) hits / m;
	b->ndcg += dcg / idcg;
	b->map += ap / m;

	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			if (!in_train[i] && in_test[i] && !in_train[j] && !in_test[j])
			{
				wins += pair_win(scores[i], scores[j]);
				pairs++;
			}
	if (pairs > 0)
	{
		b->auc_users++;
		b->auc += wins / pairs;
	}
	free(ranked);
}

static double
brute_mean(double sum, int64_t n)
{
	return n > 0 ? sum / n : NAN;
}

/* A NaN from both sides (no user counted) is agreement. */
static int
agree(double got, double want)
{
	return isnan(want) ? isnan(got) : near(got, want);
}

/*
 * Random users from few distinct scores, so ties are everywhere, with NaNs,
 * training items listed with repeats, and test items overlapping training.
 * levels sets how many distinct scores there are.
 */
static void
random_trial(TestRng *rng, int n, int k, int users, int levels,
			 double p_train, double p_test, const char *what, int trial)
{
	WalsMetricsAcc acc;
	WalsMetrics out;
	WalsRmseAcc racc;
	BruteSums	b;
	double		sse = 0.0;
	int64_t		cells = 0;
	float	   *scores = test_alloc(n, sizeof(float));
	unsigned char *in_train = test_alloc(n, 1);
	unsigned char *in_test = test_alloc(n, 1);
	int32_t    *train = test_alloc((size_t) 2 * n, sizeof(int32_t));
	int32_t    *test = test_alloc(n, sizeof(int32_t));
	float	   *ratings = test_alloc(n, sizeof(float));
	int			bad = 0;
	int			u;
	int			i;

	memset(&b, 0, sizeof(b));
	wals_metrics_init(&acc, k);
	wals_rmse_init(&racc);
	for (u = 0; u < users; u++)
	{
		int			ntrain = 0;
		int			ntest = 0;

		for (i = 0; i < n; i++)
		{
			scores[i] = rng_below(rng, 12) == 0 ? NAN :
				(float) (rng_below(rng, levels) - levels / 2) / 4.0f;
			/* -0 ties +0 */
			if (scores[i] == 0.0f && rng_below(rng, 2) == 0)
				scores[i] = -0.0f;
			in_train[i] = rng_uniform(rng) < p_train;
			in_test[i] = rng_uniform(rng) < p_test;
			if (in_train[i])
			{
				train[ntrain++] = i;
				if (rng_below(rng, 8) == 0)
					train[ntrain++] = i;
			}
			if (in_test[i])
				test[ntest++] = i;
		}
		bad += add_user(&acc, scores, n, train, ntrain, test, ntest) != WALS_OK;
		brute_user(&b, k, scores, n, in_train, in_test);

		for (i = 0; i < ntest; i++)
		{
			if (isnan(scores[test[i]]))
				scores[test[i]] = 0.5f;
			ratings[i] = (float) (1 + rng_below(rng, 5));
			sse += ((double) ratings[i] - scores[test[i]]) *
				((double) ratings[i] - scores[test[i]]);
		}
		cells += ntest;
		bad += wals_rmse_user(&racc, scores, n, test, ratings, ntest) !=
			WALS_OK;
	}
	wals_metrics_finish(&acc, &out);

	CHECK(bad == 0, "%s %d: %d users refused", what, trial, bad);
	CHECK(out.users == b.users && out.auc_users == b.auc_users &&
		  out.users_without_relevant == b.without &&
		  out.test_in_train == b.in_train,
		  "%s %d: counts %lld %lld %lld %lld, brute %lld %lld %lld %lld",
		  what, trial, (long long) out.users, (long long) out.auc_users,
		  (long long) out.users_without_relevant, (long long) out.test_in_train,
		  (long long) b.users, (long long) b.auc_users, (long long) b.without,
		  (long long) b.in_train);
	CHECK(agree(out.precision, brute_mean(b.precision, b.users)) &&
		  agree(out.recall, brute_mean(b.recall, b.users)),
		  "%s %d (n %d, k %d): precision %.15g/%.15g recall %.15g/%.15g",
		  what, trial, n, k, out.precision, brute_mean(b.precision, b.users),
		  out.recall, brute_mean(b.recall, b.users));
	CHECK(agree(out.ndcg, brute_mean(b.ndcg, b.users)) &&
		  agree(out.map, brute_mean(b.map, b.users)),
		  "%s %d (n %d, k %d): ndcg %.15g/%.15g map %.15g/%.15g",
		  what, trial, n, k, out.ndcg, brute_mean(b.ndcg, b.users),
		  out.map, brute_mean(b.map, b.users));
	CHECK(agree(out.auc, brute_mean(b.auc, b.auc_users)),
		  "%s %d (n %d): auc %.15g, all pairs %.15g", what, trial, n,
		  out.auc, brute_mean(b.auc, b.auc_users));
	CHECK(racc.cells == cells &&
		  agree(wals_rmse_finish(&racc), cells ? sqrt(sse / cells) : NAN),
		  "%s %d: rmse %.15g over %lld cells, brute %.15g over %lld",
		  what, trial, wals_rmse_finish(&racc), (long long) racc.cells,
		  cells ? sqrt(sse / cells) : NAN, (long long) cells);

	free(scores);
	free(in_train);
	free(in_test);
	free(train);
	free(test);
	free(ratings);
}

static void
test_random(void)
{
	TestRng		rng;
	int			trial;

	rng_seed(&rng, 17);
	for (trial = 0; trial < 300; trial++)
		random_trial(&rng, 1 + rng_below(&rng, 80), 1 + rng_below(&rng, 90),
					 1 + rng_below(&rng, 5), 2 + rng_below(&rng, 10),
					 0.25, 0.1 + 0.4 * rng_uniform(&rng), "small", trial);

	/* Relevant items on either side of where AUC stops counting. */
	for (trial = 0; trial < 20; trial++)
		random_trial(&rng, 200 + rng_below(&rng, 200), 10, 3, 2 + rng_below(&rng, 40), 0.1,
					 0.2 + 0.15 * rng_uniform(&rng), "medium", trial);

	/* Many relevant items per user: the case the sorted AUC exists for. */
	for (trial = 0; trial < 4; trial++)
		random_trial(&rng, 3000, 10 + 40 * trial, 2, 60, 0.1, 0.5, "large",
					 trial);
}

/* Entry point: every evaluation metric check. */
void
test_metrics(void)
{
	test_by_hand();
	test_edges();
	test_nan();
	test_errors();
	test_rmse();
	test_random();
}
