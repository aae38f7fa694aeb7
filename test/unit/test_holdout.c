/*
 * test_holdout.c
 *	  The validation split (counts, shape, determinism by ids, the share
 *	  held) and the metrics on the held-out cells against wals_metrics_user
 *	  over the scores wals_recommend ranks by.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "wals_metrics.h"
#include "wals_score.h"

/* A copy of R with its own arrays. */
static WalsCsr
csr_copy(const WalsCsr *R)
{
	WalsCsr		c = *R;
	int64_t		nnz = R->indptr[R->nrows];

	c.indptr = test_alloc(R->nrows + 1, sizeof(int64_t));
	c.indices = test_alloc(nnz > 0 ? nnz : 1, sizeof(int32_t));
	c.values = test_alloc(nnz > 0 ? nnz : 1, sizeof(float));
	memcpy(c.indptr, R->indptr, sizeof(int64_t) * (R->nrows + 1));
	memcpy(c.indices, R->indices, sizeof(int32_t) * nnz);
	memcpy(c.values, R->values, sizeof(float) * nnz);
	return c;
}

static void
csr_release(WalsCsr *R)
{
	free(R->indptr);
	free(R->indices);
	free(R->values);
}

/* Split a copy of R; returns the cells held, with keep and out filled. */
static int64_t
split_as(const WalsCsr *R, WalsFeedback feedback, const int64_t *row_ids,
		 const int64_t *col_ids, double share, uint64_t seed, WalsCsr *keep, WalsCsr *out)
{
	int64_t		n = wals_holdout_count(R, feedback, row_ids, col_ids, share, seed);

	*keep = csr_copy(R);
	out->indptr = test_alloc(R->nrows + 1, sizeof(int64_t));
	out->indices = test_alloc(n > 0 ? n : 1, sizeof(int32_t));
	out->values = test_alloc(n > 0 ? n : 1, sizeof(float));
	wals_holdout_split(keep, feedback, row_ids, col_ids, share, seed, out);
	return n;
}

static int64_t
split(const WalsCsr *R, const int64_t *row_ids, const int64_t *col_ids, double share,
	  uint64_t seed, WalsCsr *keep, WalsCsr *out)
{
	return split_as(R, WALS_IMPLICIT, row_ids, col_ids, share, seed, keep, out);
}

/* Every cell of R is in exactly one of keep and out, rows sorted, one kept. */
static int
split_wrong(const WalsCsr *R, const WalsCsr *keep, const WalsCsr *out, int64_t n)
{
	int			bad = out->indptr[R->nrows] != n ||
		keep->indptr[R->nrows] + n != R->indptr[R->nrows];

	for (int64_t u = 0; u < R->nrows && !bad; u++)
	{
		int64_t		k = keep->indptr[u];
		int64_t		o = out->indptr[u];

		bad += R->indptr[u + 1] > R->indptr[u] && keep->indptr[u + 1] == k;
		for (int64_t j = R->indptr[u]; j < R->indptr[u + 1]; j++)
		{
			if (k < keep->indptr[u + 1] && keep->indices[k] == R->indices[j] &&
				keep->values[k] == R->values[j])
				k++;
			else if (o < out->indptr[u + 1] && out->indices[o] == R->indices[j] &&
					 out->values[o] == R->values[j])
				o++;
			else
				bad++;
		}
		bad += k != keep->indptr[u + 1] || o != out->indptr[u + 1];
	}
	return bad;
}

static void
test_split(void)
{
	TestProblem tp;
	int64_t    *row_ids;
	int64_t    *col_ids;
	int64_t    *rev_ids;
	WalsCsr		keep;
	WalsCsr		out;
	WalsCsr		rev;
	WalsCsr		rkeep;
	WalsCsr		rout;
	int64_t		n;
	int64_t		nnz;
	int			bad = 0;

	problem_make(&tp, WALS_IMPLICIT, 1.0f, 300, 120, 4, 0.3, 77);
	nnz = tp.R.indptr[tp.m];
	row_ids = test_alloc(tp.m, sizeof(int64_t));
	rev_ids = test_alloc(tp.m, sizeof(int64_t));
	col_ids = test_alloc(tp.n, sizeof(int64_t));
	for (int u = 0; u < tp.m; u++)
		row_ids[u] = 1000 + 7 * u;
	for (int i = 0; i < tp.n; i++)
		col_ids[i] = 50 + 3 * i;

	n = split(&tp.R, row_ids, col_ids, 0.2, 42, &keep, &out);
	CHECK(split_wrong(&tp.R, &keep, &out, n) == 0, "split: cells lost, doubled or a user emptied");
	rev = csr_copy(&tp.R);
	memset(rev.indices, 0, sizeof(int32_t) * nnz);
	wals_holdout_join(&keep, &out, &rev);
	CHECK(memcmp(rev.indptr, tp.R.indptr, sizeof(int64_t) * (tp.m + 1)) == 0 &&
		  memcmp(rev.indices, tp.R.indices, sizeof(int32_t) * nnz) == 0 &&
		  memcmp(rev.values, tp.R.values, sizeof(float) * nnz) == 0, "join gives R back");
	csr_release(&rev);
	CHECK(n > 0.15 * nnz && n < 0.25 * nnz, "split: %lld of %lld cells held at 0.2",
		  (long long) n, (long long) nnz);
	csr_release(&keep);
	csr_release(&out);

	/* The rows in reverse order, ids with them: the same cells held. */
	rev = csr_copy(&tp.R);
	rev.indptr[0] = 0;
	for (int u = 0; u < tp.m; u++)
	{
		int			src = tp.m - 1 - u;
		int64_t		len = tp.R.indptr[src + 1] - tp.R.indptr[src];

		memcpy(rev.indices + rev.indptr[u], tp.R.indices + tp.R.indptr[src], sizeof(int32_t) * len);
		memcpy(rev.values + rev.indptr[u], tp.R.values + tp.R.indptr[src], sizeof(float) * len);
		rev.indptr[u + 1] = rev.indptr[u] + len;
		rev_ids[u] = row_ids[src];
	}
	n = split(&tp.R, row_ids, col_ids, 0.2, 42, &keep, &out);
	CHECK(split(&rev, rev_ids, col_ids, 0.2, 42, &rkeep, &rout) == n, "split: order changes the count");
	for (int u = 0; u < tp.m; u++)
	{
		int			src = tp.m - 1 - u;

		bad += rout.indptr[u + 1] - rout.indptr[u] != out.indptr[src + 1] - out.indptr[src] ||
			memcmp(rout.indices + rout.indptr[u], out.indices + out.indptr[src],
				   sizeof(int32_t) * (out.indptr[src + 1] - out.indptr[src])) != 0;
	}
	CHECK(bad == 0, "split: %d users held other cells in another row order", bad);
	csr_release(&keep);
	csr_release(&out);
	csr_release(&rkeep);
	csr_release(&rout);

	/* Another seed, another split; 0 holds nothing, 1 all but a first cell. */
	n = split(&tp.R, row_ids, col_ids, 0.2, 43, &keep, &out);
	bad = memcmp(out.indptr, rout.indptr, sizeof(int64_t)) != 0;
	CHECK(split_wrong(&tp.R, &keep, &out, n) == 0, "split, seed 43");
	csr_release(&keep);
	csr_release(&out);
	CHECK(split(&tp.R, row_ids, col_ids, 0.0, 42, &keep, &out) == 0, "share 0 holds nothing");
	csr_release(&keep);
	csr_release(&out);
	n = split(&tp.R, row_ids, col_ids, 1.0, 42, &keep, &out);
	bad = 0;
	for (int u = 0; u < tp.m; u++)
		bad += keep.indptr[u + 1] - keep.indptr[u] != (tp.R.indptr[u + 1] > tp.R.indptr[u]);
	CHECK(split_wrong(&tp.R, &keep, &out, n) == 0 && bad == 0, "share 1 keeps one cell a user");
	csr_release(&keep);
	csr_release(&out);
	csr_release(&rev);
	free(row_ids);
	free(rev_ids);
	free(col_ids);
	problem_free(&tp);
}

/*
 * Dislikes: with every other rating negative, implicit feedback holds none
 * of them out, and keeps a user whose other cells are all held; explicit
 * feedback, where a negative rating is a value like any, holds them out as
 * it holds the rest.
 */
static void
test_split_dislikes(void)
{
	TestProblem tp;
	int64_t    *row_ids;
	int64_t    *col_ids;
	WalsCsr		keep;
	WalsCsr		out;
	int64_t		n;
	int64_t		nnz;
	int64_t		negative = 0;
	int			bad = 0;

	problem_make(&tp, WALS_IMPLICIT, 1.0f, 300, 120, 4, 0.3, 78);
	nnz = tp.R.indptr[tp.m];
	row_ids = test_alloc(tp.m, sizeof(int64_t));
	col_ids = test_alloc(tp.n, sizeof(int64_t));
	for (int u = 0; u < tp.m; u++)
		row_ids[u] = 5 + u;
	for (int i = 0; i < tp.n; i++)
		col_ids[i] = 9 + i;
	for (int64_t j = 0; j < nnz; j += 2)
		tp.R.values[j] = -tp.R.values[j] - 1.0f;

	n = split_as(&tp.R, WALS_IMPLICIT, row_ids, col_ids, 0.5, 42, &keep, &out);
	for (int64_t j = 0; j < n; j++)
		bad += out.values[j] < 0.0f;
	for (int64_t j = 0; j < keep.indptr[tp.m]; j++)
		negative += keep.values[j] < 0.0f;
	CHECK(split_wrong(&tp.R, &keep, &out, n) == 0 && bad == 0 && negative == (nnz + 1) / 2 &&
		  n > 0.15 * nnz, "implicit: %d dislikes held, %lld of %lld kept, %lld cells held",
		  bad, (long long) negative, (long long) (nnz + 1) / 2, (long long) n);
	csr_release(&keep);
	csr_release(&out);

	n = split_as(&tp.R, WALS_EXPLICIT, row_ids, col_ids, 0.5, 42, &keep, &out);
	negative = 0;
	for (int64_t j = 0; j < n; j++)
		negative += out.values[j] < 0.0f;
	CHECK(split_wrong(&tp.R, &keep, &out, n) == 0 && negative > 0.15 * nnz,
		  "explicit: %lld negative ratings held of %lld", (long long) negative,
		  (long long) nnz);
	csr_release(&keep);
	csr_release(&out);
	free(row_ids);
	free(col_ids);
	problem_free(&tp);
}

/*
 * The reference of one user: wals_metrics_user over every item scored by
 * wals_score_dot, the dot product of wals_recommend's ranking.
 */
static void
reference_user(WalsMetricsAcc *acc, const TestProblem *tp, const WalsCsr *keep,
			   const WalsCsr *out, int u, float *scores, void *mscratch)
{
	int			f = tp->params.factors;

	for (int i = 0; i < tp->n; i++)
		scores[i] = wals_score_dot(tp->X + (size_t) u * f, tp->Y + (size_t) i * f, f);
	wals_metrics_user(acc, scores, tp->n, keep->indices + keep->indptr[u],
					  keep->indptr[u + 1] - keep->indptr[u], out->indices + out->indptr[u],
					  out->indptr[u + 1] - out->indptr[u], mscratch);
}

/*
 * The validation against the reference over the users it picks: the
 * ranking metrics to the bit without AUC (the int8 first pass ranks as the
 * exact scan), within rounding with it (a matrix product's sums); the
 * users picked, evenly spread; and the same sums from accumulators of one
 * user each, merged in order, whatever blocks they were scored in.
 */
static void
test_metrics_of_holdout(void)
{
	TestProblem tp;
	int64_t    *row_ids;
	int64_t    *col_ids;
	int64_t    *users;
	WalsMetricsAcc *parts;
	WalsCsr		keep;
	WalsCsr		out;
	WalsScoreIndex ix;
	void	   *buffer;
	void	   *scratch;
	float	   *scores;
	void	   *mscratch;
	int			f;

	problem_make(&tp, WALS_IMPLICIT, 1.0f, 150, 700, 6, 0.03, 78);
	f = tp.params.factors;
	row_ids = test_alloc(tp.m, sizeof(int64_t));
	col_ids = test_alloc(tp.n, sizeof(int64_t));
	for (int u = 0; u < tp.m; u++)
		row_ids[u] = u + 1;
	for (int i = 0; i < tp.n; i++)
		col_ids[i] = i + 1;
	split(&tp.R, row_ids, col_ids, 0.3, 5, &keep, &out);
	buffer = test_alloc(wals_score_index_size(tp.n, f), 1);
	wals_score_index_build(&ix, tp.Y, tp.n, f, buffer);
	scratch = test_alloc(wals_holdout_scratch(tp.n, f, 10, 1) +
						 wals_holdout_scratch(tp.n, f, 10, 0), 1);
	scores = test_alloc(tp.n, sizeof(float));
	mscratch = test_alloc(wals_metrics_scratch_size(tp.n, 10), 1);
	users = test_alloc(tp.m, sizeof(int64_t));
	parts = test_alloc(tp.m, sizeof(WalsMetricsAcc));
	for (int with_auc = 0; with_auc <= 1; with_auc++)
		for (int limit = 0; limit <= 40; limit += 40)
		{
			WalsMetricsAcc acc;
			WalsMetricsAcc merged;
			WalsMetrics want;
			WalsMetrics got;
			WalsMetrics from_parts;
			int64_t		picks = wals_holdout_pick(&out, limit, users);
			double		tol = with_auc ? 1e-6 : 0.0;
			int			spread = 1;
			WalsStatus	st;

			wals_metrics_init(&acc, 10);
			for (int64_t j = 0; j < picks; j++)
			{
				reference_user(&acc, &tp, &keep, &out, (int) users[j], scores, mscratch);
				spread &= j == 0 || users[j] > users[j - 1];
			}
			wals_metrics_finish(&acc, &want);
			st = wals_holdout_metrics(&ix, tp.X, &keep, &out, 10, with_auc, limit, scratch, &got);
			CHECK(st == WALS_OK && got.users == picks && want.users == picks && spread &&
				  (limit == 0 || picks == limit) &&
				  (limit > 0 || picks == wals_holdout_users(&out, 0)) &&
				  fabs(got.ndcg - want.ndcg) <= tol && fabs(got.recall - want.recall) <= tol &&
				  fabs(got.precision - want.precision) <= tol &&
				  fabs(got.map - want.map) <= tol &&
				  (with_auc ? fabs(got.auc - want.auc) < 1e-6 && got.auc_users == want.auc_users :
				   got.auc_users == 0) &&
				  got.users_without_relevant == want.users_without_relevant &&
				  got.test_in_train == want.test_in_train,
				  "metrics%s, %d users at most: ndcg %.17g over %lld users, want %.17g over %lld",
				  with_auc ? " with AUC" : "", limit, got.ndcg, (long long) got.users, want.ndcg,
				  (long long) want.users);

			/* in two uneven pieces, merged in order: the same bits */
			wals_metrics_init(&merged, 10);
			st = wals_holdout_score(&ix, tp.X, &keep, &out, users, picks / 3, 10, with_auc,
									scratch, parts);
			if (st == WALS_OK)
				st = wals_holdout_score(&ix, tp.X, &keep, &out, users + picks / 3,
										picks - picks / 3, 10, with_auc, scratch,
										parts + picks / 3);
			for (int64_t j = 0; j < picks; j++)
				wals_metrics_merge(&merged, &parts[j]);
			wals_metrics_finish(&merged, &from_parts);
			CHECK(st == WALS_OK && from_parts.users == got.users &&
				  from_parts.ndcg == got.ndcg && from_parts.recall == got.recall &&
				  from_parts.precision == got.precision && from_parts.map == got.map &&
				  (!with_auc || from_parts.auc == got.auc),
				  "metrics%s, %d users at most, by pieces: ndcg %.17g, want %.17g",
				  with_auc ? " with AUC" : "", limit, from_parts.ndcg, got.ndcg);
		}
	csr_release(&keep);
	csr_release(&out);
	free(buffer);
	free(scratch);
	free(scores);
	free(mscratch);
	free(users);
	free(parts);
	free(row_ids);
	free(col_ids);
	problem_free(&tp);
}

/* Metric names: each kind and k, and what is refused. */
static void
test_metric_names(void)
{
	static const struct
	{
		const char *name;
		int			ok;
		WalsMetricKind kind;
		int			k;
	}			cases[] = {
		{"ndcg@20", 1, WALS_METRIC_NDCG, 20},
		{"recall@1", 1, WALS_METRIC_RECALL, 1},
		{"precision@1000", 1, WALS_METRIC_PRECISION, 1000},
		{"map@007", 1, WALS_METRIC_MAP, 7},
		{"auc", 1, WALS_METRIC_AUC, 1},
		{"precision@1001", 0, WALS_METRIC_AUC, 0},
		{"ndcg@0", 0, WALS_METRIC_AUC, 0},
		{"ndcg@", 0, WALS_METRIC_AUC, 0},
		{"ndcg@-5", 0, WALS_METRIC_AUC, 0},
		{"ndcg@+5", 0, WALS_METRIC_AUC, 0},
		{"ndcg@ 5", 0, WALS_METRIC_AUC, 0},
		{"ndcg@5 ", 0, WALS_METRIC_AUC, 0},
		{"ndcg@99999999999999999999", 0, WALS_METRIC_AUC, 0},
		{"NDCG@20", 0, WALS_METRIC_AUC, 0},
		{"ndcg", 0, WALS_METRIC_AUC, 0},
		{"auc@10", 0, WALS_METRIC_AUC, 0},
		{"rmse", 1, WALS_METRIC_RMSE, 1},
		{"rmse@10", 0, WALS_METRIC_AUC, 0},
		{"RMSE", 0, WALS_METRIC_AUC, 0},
		{"", 0, WALS_METRIC_AUC, 0},
	};
	WalsMetrics m = {0.1, 0.2, 0.3, 0.4, NAN, 0, 0, 0, 0};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		WalsMetricKind kind = WALS_METRIC_AUC;
		int			k = -1;
		int			ok = wals_metric_parse(cases[i].name, 1000, &kind, &k);

		CHECK(ok == cases[i].ok && (!ok || (kind == cases[i].kind && k == cases[i].k)),
			  "metric \"%s\": %d, kind %d, k %d", cases[i].name, ok, (int) kind, k);
	}
	CHECK(wals_metric_value(&m, WALS_METRIC_PRECISION) == 0.1 &&
		  wals_metric_value(&m, WALS_METRIC_RECALL) == 0.2 &&
		  wals_metric_value(&m, WALS_METRIC_NDCG) == 0.3 &&
		  wals_metric_value(&m, WALS_METRIC_MAP) == 0.4 &&
		  wals_metric_value(&m, WALS_METRIC_AUC) == 0.0,
		  "metric values, NaN as 0");
}

/* RMSE on held cells: by hand, no cell, and an item out of range. */
static void
test_rmse_of_holdout(void)
{
	/* x0 = (1, 2), x1 = (0, 1); y0 = (1, 0), y1 = (1, 1), y2 = (2, -1) */
	float		X[] = {1, 2, 0, 1};
	float		Y[] = {1, 0, 1, 1, 2, -1};
	int64_t		indptr[] = {0, 2, 3};
	int32_t		indices[] = {0, 2, 1};
	float		values[] = {2, 1, 4};
	WalsCsr		held = {2, 3, indptr, indices, values, NULL, NULL};
	int64_t		none_ptr[] = {0, 0, 0};
	WalsCsr		none = {2, 3, none_ptr, indices, values, NULL, NULL};
	int32_t		bad[] = {0, 3, 1};
	WalsCsr		out = {2, 3, indptr, bad, values, NULL, NULL};
	double		rmse = -1;
	char		name[32];

	/* scores 1, 0, 1 against 2, 1, 4: errors -1, -1, -3 */
	CHECK(wals_holdout_rmse(X, Y, 2, &held, &rmse) == WALS_OK &&
		  fabs(rmse - sqrt(11.0 / 3.0)) < 1e-12, "rmse by hand: %.17g", rmse);
	CHECK(wals_holdout_rmse(X, Y, 2, &none, &rmse) == WALS_OK && isnan(rmse),
		  "no held cell: NaN");
	CHECK(wals_holdout_rmse(X, Y, 2, &out, &rmse) == WALS_EINVAL, "an item out of range");
	CHECK(wals_holdout_rmse(NULL, Y, 2, &held, &rmse) == WALS_EINVAL, "no factors");
	wals_metric_name(WALS_METRIC_RMSE, 1, name, sizeof(name));
	CHECK(strcmp(name, "rmse") == 0 && wals_metric_lower_better(WALS_METRIC_RMSE) &&
		  !wals_metric_lower_better(WALS_METRIC_NDCG), "rmse's name and direction");
}

void
test_holdout(void)
{
	test_split();
	test_split_dislikes();
	test_metrics_of_holdout();
	test_metric_names();
	test_rmse_of_holdout();
}
