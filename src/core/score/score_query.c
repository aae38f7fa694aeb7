/*
 * score_query.c
 *	  Exact top-k recommendation scores: an int8 first pass with provable
 *	  bounds, exact rescoring of the items those bounds cannot rule out,
 *	  and batches of users that share the first pass or, on the portable
 *	  path, go through the matrix product.
 *
 * A query's reference is the scan of every eligible item with the core's
 * float dot product (wals_score_dot).  Scanning 27,000 float rows of 64
 * factors reads 7 MB, more than a core's caches hold, so the first pass
 * reads a copy of Y in bytes instead, a quarter of that, with one scale per
 * item, and bounds each item's reference score from below and above.  The
 * k-th best lower bound is a floor under the k-th best reference score:
 * only items whose upper bound reaches it can be in the result.  Those few
 * are scored again with wals_score_dot and selected with the same heap as
 * the reference, so indices, scores and order are the reference's own.
 * The float scores returned never come from the approximation.
 *
 * Why the bounds hold.  Write u = 2^-24, and split y = yq + ey and
 * x = xq + ex, where yq = s_y q_y with q_y integers in [-127, 127] and
 * s_y = max|y_j| / 127 (likewise xq, one scale per query), and ey, ex are
 * the quantisation errors, whose norms are measured exactly (in double,
 * rounded up) rather than estimated.  Then:
 *
 *	 x.y = xq.yq + xq.ey + ex.y, so |x.y - xq.yq| <= |xq||ey| + |ex||y|
 *	 (Cauchy-Schwarz on each term);
 *
 *	 the reference r = fl(x.y), summed in any order with or without fused
 *	 multiply-adds, has |r - x.y| <= gamma sum_j |x_j y_j| <= gamma |x||y|
 *	 with gamma = m u / (1 - m u) for m = f + 2 (Higham, Accuracy and
 *	 Stability of Numerical Algorithms, section 3.1; f roundings suffice on
 *	 any path of the summation tree, two are spare), plus an absolute eta
 *	 for underflow;
 *
 *	 the first pass computes the integer q_x.q_y exactly and
 *	 a = fl(float(q_x.q_y) fl(s_x s_y)): three roundings, so
 *	 |a - xq.yq| <= 3.0001 u |xq||yq| <= 3.0001 u |xq| (|y| + |ey|);
 *
 *	 forming a - E and a + E in float costs u (|a| + E) more.
 *
 * Hence every item's reference lies in [fl(a - E), fl(a + E)] with
 *	 E = A |ey| + B |y| + eta,  A = |xq| (1 + 8u),
 *	 B = |ex| + gamma |x| + 8u |xq|,  eta = f 2^-112,
 * where the 8u terms hold the 4.0002u above, A, B and eta are inflated by
 * 2^-20 and rounded up so that the float evaluation of E (at most four
 * roundings of nonnegative terms) cannot fall short, and eta covers
 * underflow in the reference (f 2^-126, even flushed) and in a (at most
 * 127^2 f 2^-150).  The rounding mode is the default, to nearest, and
 * subnormal inputs are not flushed to zero, as in PostgreSQL.  Overflow is
 * excluded up front: a query whose |x| max|y| exceeds 2^100 is scanned
 * exactly, as is any query against an item matrix holding a non-finite
 * value, or with a non-finite x.
 *
 * Why the selection is exact.  Let T be the k-th best lower bound among
 * eligible items.  Those k items have references >= T, so the k-th best
 * reference is >= T, and every item of the reference top k has
 * upper >= reference >= T: it is among the candidates.  The reference order
 * is total (score, then index), so the top k of any superset of the
 * reference top k is the reference top k.  During the scan the running
 * threshold only rises towards T, so the candidates gathered against it
 * are a superset, filtered against the final T at the end.
 *
 * Layout.  Items go in blocks of 16, one vector of 32-bit lanes: per group
 * of four factors, 64 bytes hold the four bytes of each of the 16 items,
 * so that one VNNI instruction (vpdpbusd) adds four products to each of
 * 16 item sums with no horizontal reduction; then 16 scales s_y, 16 error
 * norms |ey| and 16 norms |y|.  Bytes are stored as q_y + 128, unsigned,
 * because vpdpbusd multiplies unsigned bytes by signed ones and only the
 * signed operand can be a broadcast from memory (the query's four bytes);
 * the 128 sum_j q_x,j it adds is subtracted once per query.
 *
 * Paths.  What computes the byte sums follows the kernel family in use
 * (wals_kernels_use): AVX-512 with VNNI; AVX2, which AVX-512 without VNNI
 * uses too; NEON with SDOT (Arm's dotprod) or without; and a portable path
 * that reads the layout in 16-byte vectors of int16 products, which every
 * vector unit has.  The integer sums are exact on every path, in any
 * order, so all give the same a; only their evaluations of E may round
 * differently, which the bound allows for.
 * AVX2 multiplies bytes only in vpmaddubsw, which adds two products of an
 * unsigned and a signed byte into an int16 lane that saturates, and the
 * stored bytes times q_x could reach 2 * 255 * 127.  A lane of stored
 * bytes (0 to 255) lies between 255 times the sum of its negative query
 * bytes and 255 times the sum of its positive ones, so where neither sum
 * exceeds 128 in magnitude, 255 * 128 = 32640 fits and the lane is exact.
 * Such "narrow" groups of four factors (about 86% on random or trained
 * factors) go in as stored, two groups in one lane (added with vpaddw,
 * which wraps, exact where the true sum fits) where all their bytes
 * together still meet the condition.  The other groups go in as |q_x|
 * times q_y with q_x's sign (vpsignb): products of at most 127^2, lanes of
 * at most 32258 (neither byte is ever -128).  vpmaddwd then adds the lanes
 * into int32 sums, exactly.  NEON multiplies signed bytes by signed bytes,
 * so its paths turn the stored bytes back into q_y: SDOT adds four
 * products into an int32 lane; without it, vmull_s8 forms products of at
 * most 127^2 in int16 lanes and vmlal_s8 adds one more, as the portable
 * path does, before they are widened.
 *
 * Order.  The blocks hold the items by their stored norm |y|, largest
 * first (ties by item number), beside two arrays that map positions to
 * items and back.  Any item's reference obeys r <= x.y + gamma |x||y| +
 * eta <= (1 + gamma) |x||y| + eta, so once that bound for the first item
 * of a block, whose norm is the largest left, falls below the running
 * floor, no item from there on can reach the floor: the query's pass ends
 * there.  Trained item factors are far from equal in norm (popular items
 * are long), and the floor rises fastest on the long items scanned first,
 * so a query at k = 20 typically stops after a few percent of the blocks.
 * The bound is evaluated in float as reach |y| + reach_eta, with reach
 * and reach_eta inflated by 2^-20 and rounded up so that its two
 * roundings cannot fall short.
 *
 * Filters are applied inside the scan: a query maps its sorted skip list
 * and optional allow list to positions, in a bitmap of one 16-bit word
 * per block in its scratch (n / 8 bytes, set up in time linear in the
 * blocks and the lists), and a block whose word is empty is passed over.
 * The bounds only prune when k is small beside the eligible items;
 * otherwise the exact scan is cheaper, and gives the same result.
 *
 * A batch with byte products in vectors (all but the portable path) runs
 * the first pass of SCAN_USERS users block by block, so that a block read
 * from memory serves them all: a single query is bound by the traffic
 * from the last-level cache, a batch by arithmetic.  On the portable path,
 * where byte products cost several instructions each, the batch starts
 * with the first pass and keeps it while the queries stop early; where
 * they do not (factors of nearly equal norms), it scores the remaining
 * blocks of users against blocks of items with one cblas_sgemm each.  The
 * product's scores s obey the same rounding bound as the reference, so
 * |s - r| <= M = 2 (gamma |x| max|y| + eta).  If S_k is the k-th best s,
 * k items have r >= S_k - M, so every item of the reference top k has
 * s >= S_k - 2M.  A heap per user keeps the best k + 8 products; when its
 * worst lies below S_k - 2M it holds every such item, which are then
 * rescored with wals_score_dot; when it does not (many near-ties), that
 * user alone is scanned exactly.  NEON without SDOT shares the first pass
 * too, a choice made without an Arm machine to time it: its byte products
 * take about as many instructions per item as the matrix product's
 * multiply-adds of four floats, and read a quarter of the memory.
 *
 * Files.  This one holds the preparation of a query, its rescoring, the
 * batches through the first pass and the choice of path; score_index.c
 * builds the index, and score_exact.c holds the exact scan and the batch
 * through the matrix product.  The first pass of each path is in
 * score_portable.c, score_x86.c or score_arm.c, each built for its own
 * instruction set around the loops that score_internal.h shares with
 * them, beside what the path reads of a query besides its bytes.
 */
#include <math.h>
#include <string.h>

#include "score_internal.h"

float
wals_score_dot(const float *x, const float *y, int f)
{
	return wals_kernels()->dot(x, y, f);
}

/* ---------- the first pass ---------- */

/*
 * Bytes of one query's scratch, and where its parts go from p (aligned)
 * when qs is not NULL.  The lower-bound heap only runs when k < n (see
 * prunes): min(k, n) entries.
 */
static size_t
query_scratch_layout(const WalsScoreIndex *ix, int k, unsigned char *p,
					 QueryScratch *qs)
{
	int64_t		kk = k < 1 ? 1 : k < ix->n ? k : ix->n;
	size_t		sq = wals_align_size(4 * (size_t) ix->groups);
	size_t		sp = wals_align_size(32 * (size_t) ix->groups);
	size_t		sk = wals_align_size(4 * (size_t) kk);
	size_t		sn = wals_align_size(4 * (size_t) ix->n);
	size_t		se = wals_align_size(2 * (size_t) block_count(ix->n));

	if (qs)
	{
		qs->qx = (int32_t *) p;
		qs->offset = (int32_t *) (p + sq);
		qs->qx_ordered = (int32_t *) (p + 2 * sq);
		qs->qabs_ordered = (int32_t *) (p + 3 * sq);
		qs->pairs = (int16_t *) (p + 4 * sq);
		qs->floor = (float *) (p + 4 * sq + sp);
		qs->cand = (int32_t *) (p + 4 * sq + sp + sk);
		qs->cand_upper = (float *) (p + 4 * sq + sp + sk + sn);
		qs->eligible = (uint16_t *) (p + 4 * sq + sp + sk + 2 * sn);
	}
	return 4 * sq + sp + sk + 2 * sn + se;
}

/*
 * One instruction set's preparation of a query, its first pass for nu
 * queries at once, its bounds alone (for tests), and the batch that suits
 * it.
 */
typedef struct ScorePath ScorePath;

struct ScorePath
{
	const char *name;
	PrepareFn	prepare;		/* NULL where the block function reads q_x alone */
	void		(*scan) (const WalsScoreIndex *ix, const Query *q, Scan *st,
						 int nu);
	void		(*bounds) (const WalsScoreIndex *ix, const Query *q,
						   float *lower, float *upper);
	void		(*batch) (const WalsScoreIndex *ix, const float *X,
						  int64_t lo, int64_t hi,
						  const WalsScoreFilter *filters, int k,
						  int32_t *idx, float *score, int *count,
						  unsigned char *scratch);
};

static const ScorePath *score_path(void);

/*
 * Quantise x into the scratch and derive the bound's terms, and what
 * the path's block function reads besides (prepare).  Returns 0 where the
 * bounds do not apply: the query must then scan exactly.
 */
static int
prepare_query(const WalsScoreIndex *ix, const float *x, const QueryScratch *qs,
			  PrepareFn prepare, Query *q)
{
	int			f = ix->f;
	int8_t	   *q8 = (int8_t *) qs->qx;
	double		mx = 0.0;
	double		x2 = 0.0;
	double		xq2 = 0.0;
	double		e2 = 0.0;
	double		xn;
	double		xqn;
	double		en;
	int64_t		qsum = 0;
	float		s;
	int			j;

	if (!ix->usable)
		return 0;
	for (j = 0; j < f; j++)
	{
		if (!isfinite(x[j]))
			return 0;
		mx = fabs((double) x[j]) > mx ? fabs((double) x[j]) : mx;
		x2 += (double) x[j] * x[j];
	}
	xn = sqrt(x2) * (1.0 + SLACK_DOUBLE);
	if (xn * ix->max_norm > SCORE_MAX_PRODUCT)
		return 0;
	s = (float) (mx / 127.0);
	memset(q8, 0, 4 * (size_t) ix->groups);
	for (j = 0; j < f; j++)
	{
		int			v = s > 0.0f ? clamp_byte(x[j] / (double) s) : 0;
		double		h = (double) s * v;

		q8[j] = (int8_t) v;
		qsum += v;
		xq2 += h * h;
		e2 += (x[j] - h) * (x[j] - h);
	}
	xqn = sqrt(xq2) * (1.0 + SLACK_DOUBLE);
	en = sqrt(e2) * (1.0 + SLACK_DOUBLE);
	if (prepare)
		prepare(q8, ix->groups, qs, q);
	q->qx = qs->qx;
	q->corr = (int32_t) (-128 * qsum);
	q->sx = s;
	q->A = float_up(xqn * (1.0 + 8 * U_ROUND) * (1.0 + SLACK_FLOAT));
	q->B = float_up((en + dot_gamma(f) * xn + 8 * U_ROUND * xqn) *
					(1.0 + SLACK_FLOAT));
	q->eta = float_up(underflow_eta(f) * (1.0 + SLACK_FLOAT));
	q->reach = float_up((1.0 + dot_gamma(f)) * xn * (1.0 + SLACK_FLOAT));
	q->reach_eta = 2 * q->eta;
	return 1;
}

/*
 * The filter's map of positions, a word per block: the allowed items, or
 * all n, less the skipped ones.
 */
static void
eligible_map(const WalsScoreIndex *ix, const WalsScoreFilter *filter,
			 uint16_t *eligible)
{
	int64_t		nblocks = block_count(ix->n);
	int64_t		j;

	if (filter && filter->allow)
	{
		memset(eligible, 0, sizeof(uint16_t) * (size_t) nblocks);
		for (j = 0; j < filter->nallow; j++)
			if (filter->allow[j] >= 0 && filter->allow[j] < ix->n)
			{
				int32_t		p = ix->position[filter->allow[j]];

				eligible[p / BLOCK] |= (uint16_t) (1u << (p % BLOCK));
			}
	}
	else
	{
		memset(eligible, 0xff, sizeof(uint16_t) * (size_t) nblocks);
		if (ix->n % BLOCK)
			eligible[nblocks - 1] = (uint16_t) ((1u << (ix->n % BLOCK)) - 1);
	}
	if (filter && filter->skip)
		for (j = 0; j < filter->nskip; j++)
			if (filter->skip[j] >= 0 && filter->skip[j] < ix->n)
			{
				int32_t		p = ix->position[filter->skip[j]];

				eligible[p / BLOCK] &= (uint16_t) ~(1u << (p % BLOCK));
			}
}

/*
 * Start the first pass of query x in its scratch, or return 0 where the
 * query must scan exactly: the bounds would not prune, or do not apply.
 */
static int
query_begin(const WalsScoreIndex *ix, const float *x,
			const WalsScoreFilter *filter, int k, const QueryScratch *qs,
			Query *q, Scan *st)
{
	if (!prunes(ix, filter, k) ||
		!prepare_query(ix, x, qs, score_path()->prepare, q))
		return 0;
	eligible_map(ix, filter, qs->eligible);
	q->eligible = qs->eligible;
	st->floor = qs->floor;
	st->nfloor = 0;
	st->k = k;
	st->threshold = -INFINITY;
	st->cand = qs->cand;
	st->cand_upper = qs->cand_upper;
	st->ncand = 0;
	return 1;
}

/* The candidates whose upper bound reaches the final floor, rescored. */
static int
rescore(const WalsScoreIndex *ix, const float *x, const Scan *st, int k,
		int32_t *idx, float *score)
{
	float		(*dot) (const float *, const float *, int) = wals_kernels()->dot;
	int			f = ix->f;
	WalsTopK	heap;
	int64_t		c;

	wals_topk_init(&heap, k, idx, score);
	for (c = 0; c < st->ncand; c++)
		if (st->cand_upper[c] >= st->threshold)
		{
			wals_topk_push(&heap, st->cand[c],
						   dot(x, ix->Y + (size_t) st->cand[c] * f, f));
			/* a row read from memory, out of order */
			wals_poll((int64_t) 2 * f);
		}
	return wals_topk_finish(&heap);
}

/* ---------- batch: through the first pass ---------- */

/* Bytes of a first-pass batch's scratch: SCAN_USERS queries'. */
static size_t
first_pass_scratch_size(const WalsScoreIndex *ix, int k)
{
	return SCAN_USERS * query_scratch_layout(ix, k, NULL, NULL);
}

/*
 * The next SCAN_USERS users from u0, short of hi, through one shared first
 * pass.  Returns the blocks the pass visited for them, in all, and their
 * number in *scanned (the others were scanned exactly).
 */
static int64_t
first_pass_group(const WalsScoreIndex *ix, const float *X, int64_t u0,
				 int64_t hi, const WalsScoreFilter *filters, int k,
				 int32_t *idx, float *score, int *count,
				 unsigned char *scratch, int *scanned)
{
	size_t		per_user = query_scratch_layout(ix, k, NULL, NULL);
	int			nu = hi - u0 < SCAN_USERS ? (int) (hi - u0) : SCAN_USERS;
	int			f = ix->f;
	Query		q[SCAN_USERS];
	Scan		st[SCAN_USERS];
	int64_t		who[SCAN_USERS];
	int64_t		visited = 0;
	int			active = 0;
	int			j;

	for (j = 0; j < nu; j++)
	{
		int64_t		u = u0 + j;
		const WalsScoreFilter *filter = filters ? &filters[u] : NULL;
		QueryScratch qs;

		query_scratch_layout(ix, k, scratch + j * per_user, &qs);
		if (query_begin(ix, X + (size_t) u * f, filter, k, &qs,
						&q[active], &st[active]))
			who[active++] = u;
		else
			count[u] = wals_score_exact_topk(ix, X + (size_t) u * f, filter, k,
											 idx + (size_t) u * k,
											 score + (size_t) u * k);
	}
	if (active)
		score_path()->scan(ix, q, st, active);
	for (j = 0; j < active; j++)
	{
		visited += st[j].visited;
		count[who[j]] = rescore(ix, X + (size_t) who[j] * f, &st[j], k,
								idx + (size_t) who[j] * k,
								score + (size_t) who[j] * k);
	}
	*scanned = active;
	return visited;
}

/*
 * The batch where byte products are in vectors: SCAN_USERS queries share
 * each block of the first pass, which then costs arithmetic rather than
 * memory traffic.
 */
static void
batch_first_pass(const WalsScoreIndex *ix, const float *X, int64_t lo,
				 int64_t hi, const WalsScoreFilter *filters, int k,
				 int32_t *idx, float *score, int *count,
				 unsigned char *scratch)
{
	int64_t		u0;
	int			scanned;

	for (u0 = lo; u0 < hi; u0 += SCAN_USERS)
		first_pass_group(ix, X, u0, hi, filters, k, idx, score, count, scratch, &scanned);
}

/*
 * The portable path's byte products cost several instructions each, about
 * PORTABLE_PRODUCT_RATIO times what the matrix product spends on an item,
 * so its first pass only pays where it stops early.  A batch starts with
 * it and goes on with it while its groups visit less than that share of
 * the blocks, which trained factors, whose norms spread widely, do; on
 * factors of nearly equal norms it turns to the product for the rest.
 */
#define PORTABLE_PRODUCT_RATIO 4

static void
batch_portable(const WalsScoreIndex *ix, const float *X, int64_t lo,
			   int64_t hi, const WalsScoreFilter *filters, int k,
			   int32_t *idx, float *score, int *count,
			   unsigned char *scratch)
{
	int64_t		u0;

	for (u0 = lo; u0 < hi; u0 += SCAN_USERS)
	{
		int			scanned;
		int64_t		visited;

		visited = first_pass_group(ix, X, u0, hi, filters, k, idx, score, count, scratch,
								   &scanned);
		if (visited * PORTABLE_PRODUCT_RATIO > scanned * block_count(ix->n))
		{
			wals_score_batch_product(ix, X,
									 u0 + SCAN_USERS < hi ? u0 + SCAN_USERS : hi,
									 hi, filters, k, idx, score, count, scratch);
			return;
		}
	}
}

/* ---------- dispatch ---------- */

static const ScorePath portable_path = {
	"portable", wals_score_prepare_portable, wals_score_scan_portable,
	wals_score_bounds_portable, batch_portable
};

#ifdef SCORE_X86
static const ScorePath vnni_path = {
	"avx512vnni", NULL, wals_score_scan_vnni, wals_score_bounds_vnni,
	batch_first_pass
};

static const ScorePath avx2_path = {
	"avx2", wals_score_prepare_avx2, wals_score_scan_avx2,
	wals_score_bounds_avx2, batch_first_pass
};
#endif

#ifdef SCORE_NEON
static const ScorePath neon_path = {
	"neon", NULL, wals_score_scan_neon, wals_score_bounds_neon,
	batch_first_pass
};
#endif

#ifdef SCORE_DOTPROD
static const ScorePath dotprod_path = {
	"neon-dotprod", NULL, wals_score_scan_dotprod, wals_score_bounds_dotprod,
	batch_first_pass
};
#endif

/*
 * The path of the kernel family in use, so that wals_kernels_use (the
 * server's wals.kernels) moves scoring along with the solvers, and tests
 * and benchmarks reach every path through it.  Asking again each time
 * costs a switch and a look at the CPU's features, which never change, so
 * no choice is cached that a later wals_kernels_use would leave stale.
 */
static const ScorePath *
score_path(void)
{
	switch (wals_kernels()->isa)
	{
#ifdef SCORE_X86
		case WALS_ISA_AVX512:
			if (wals_cpu_feature(WALS_CPU_VNNI))
				return &vnni_path;
			return &avx2_path;
		case WALS_ISA_AVX2:
			return &avx2_path;
#endif
#ifdef SCORE_NEON
		case WALS_ISA_NEON:
#ifdef SCORE_DOTPROD
			if (wals_cpu_feature(WALS_CPU_DOTPROD))
				return &dotprod_path;
#endif
			return &neon_path;
#endif
		default:
			return &portable_path;
	}
}

const char *
wals_score_path(void)
{
	return score_path()->name;
}

/* ---------- entry points ---------- */

size_t
wals_score_scratch_size(const WalsScoreIndex *ix, int k)
{
	return WALS_ALIGN + query_scratch_layout(ix, k, NULL, NULL);
}

int
wals_score_topk(const WalsScoreIndex *ix, const float *x,
				const WalsScoreFilter *filter, int k, int32_t *idx,
				float *score, void *scratch)
{
	QueryScratch qs;
	Query		q;
	Scan		st;

	if (k < 1)
		return 0;
	query_scratch_layout(ix, k, wals_align_ptr(scratch), &qs);
	if (!query_begin(ix, x, filter, k, &qs, &q, &st))
		return wals_score_exact_topk(ix, x, filter, k, idx, score);
	score_path()->scan(ix, &q, &st, 1);
	return rescore(ix, x, &st, k, idx, score);
}

int
wals_score_bounds(const WalsScoreIndex *ix, const float *x, float *lower,
				  float *upper, void *scratch)
{
	QueryScratch qs;
	Query		q;

	query_scratch_layout(ix, 1, wals_align_ptr(scratch), &qs);
	if (!prepare_query(ix, x, &qs, score_path()->prepare, &q))
		return 0;
	score_path()->bounds(ix, &q, lower, upper);
	return 1;
}

size_t
wals_score_batch_scratch_bound(int64_t n, int f, int k)
{
	WalsScoreIndex shape = {0};

	shape.n = n;
	shape.f = f;
	shape.groups = (f + 3) / 4;
	return wals_score_batch_scratch_size(&shape, k);
}

/* Either batch may run: wals_kernels_use may change the path in between. */
size_t
wals_score_batch_scratch_size(const WalsScoreIndex *ix, int k)
{
	size_t		product = wals_score_product_scratch_size(ix, k);
	size_t		first_pass = first_pass_scratch_size(ix, k);

	return WALS_ALIGN + (product > first_pass ? product : first_pass);
}

void
wals_score_topk_batch(const WalsScoreIndex *ix, const float *X,
					  int64_t lo, int64_t hi, const WalsScoreFilter *filters,
					  int k, int32_t *idx, float *score, int *count,
					  void *scratch)
{
	int64_t		u;

	if (k < 1)
	{
		for (u = lo; u < hi; u++)
			count[u] = 0;
		return;
	}
	score_path()->batch(ix, X, lo, hi, filters, k, idx, score, count,
						wals_align_ptr(scratch));
}
