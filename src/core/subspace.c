/*
 * subspace.c
 *	  The iALS++ row update (Rendle, Krichene, Zhang and Koren,
 *	  arXiv:2110.14044): exact solves over one block of dimensions at a time.
 *
 * The exact update of solve.c builds the row's f x f system, O(nnz f^2)
 * for the Gram of its cells, which rules out the f of 512 to 4096 at which
 * implicit models keep improving.  Here the row's part of L is minimised
 * over the dimensions B = [k0, k0 + b) with the others held, block after
 * block, each exactly:
 *
 *	  (w0 G_BB + sum_i (c_i - w0) y_iB y_iB^T + lambda s I) delta
 *		  = sum_i (c_i p_i - (c_i - w0) yhat_i) y_iB - w0 (G x)_B - lambda s x_B
 *
 * (the right-hand side is minus half the gradient over B), then x_B +=
 * delta.  The predictions yhat_i = x.y_i are computed once per row and
 * brought up to date block by block, so a block costs O(nnz b^2) for its
 * Gram and O(nnz b) for the rest, and the row O(nnz f b + f^2 + f b^2).
 * Every block's step is exact, so the row's loss never rises; with b >= f
 * there is one block and this is the exact update, solved the same way.
 *
 * The one pass a block makes over the cells (kern->sub_block) also applies
 * the previous block's step to the predictions, so each block reads two
 * short pieces of each factor row and nothing else.  (G x)_B is computed
 * afresh for each block from the rows B of G, rather than kept as a vector
 * updated after each step, which would read G twice per row; for a group
 * of rows it is one product of the rows B of G with the group's rows of X
 * (kern->gemm_nt), each row of G loaded once for several of X.
 *
 * Rows go through the blocks in groups, in step: the rows B of G are then
 * read once per group instead of once per row.  Per row, all of G would
 * be read (f^2 floats: 1 MB at f = 512, 64 MB at f = 4096), so groups grow
 * with f^2, to about SUB_G_BYTES of G per row.  What groups cost is their
 * factor rows, which stay in cache between the passes of a small group
 * and not of a large one.  A group of several rows therefore takes at most
 * f cells, whose factor rows are as large as G: reading G then costs each
 * row about as much as reading its own cells.  (On the 20M-rating
 * benchmark at f = 512, groups of 8 users saved 1 s of reading G and lost
 * 1 s to their cells, groups of 8 items lost 2 s; at f = 4096, on 200k
 * ratings, the sweeps took 5.8 s in groups and 20 s row by row.)  The
 * arithmetic of a row does not depend on its group, so any split of
 * [lo, hi) gives the same bits.
 */
#include <math.h>
#include <string.h>

#include "wals_internal.h"

/* Bytes of G read per row that groups aim at, and their rows at most. */
#define SUB_G_BYTES (128 * 1024)
#define SUB_GROUP_ROWS 256

/* Floats of the block systems of a group at most. */
#define SUB_SYSTEM_FLOATS (256 * 1024)

/*
 * Cells whose starting predictions are taken at a time, with a poll
 * between: a row of 12,000 cells at f = 4096 is 50 million multiply-adds.
 */
#define SUB_DOTS_CELLS 256

/* Per row of a group: its cells and predictions, its block system. */
typedef struct SubRow
{
	int64_t		u;
	int			at;				/* u less the group's first row */
	const int32_t *idx;
	const float *val;
	int			nnz;
	float		s;
	float	   *x;
	float	   *yhat;
	float	   *A;
	float	   *rhs;
	float	   *dp;				/* the last block's step */
	WalsStatus	status;
} SubRow;

/* Floats rounded up to whole vectors, so that the next buffer stays aligned. */
static size_t
whole(size_t n)
{
	return (n + WALS_VEC - 1) / WALS_VEC * WALS_VEC;
}

/* Round a scratch pointer up to WALS_ALIGN; the scratch leaves room. */
static float *
align_floats(float *p)
{
	return (float *) wals_align_ptr(p);
}

/* A block size of f or more is one block. */
static int
block_width(const WalsParams *params)
{
	return params->block_size < params->factors ? params->block_size : params->factors;
}

/* Floats of one row's block system: A, the right-hand side and the step. */
static size_t
system_floats(int width)
{
	size_t		bp = (size_t) wals_pad(width);

	return (size_t) width * bp + 2 * bp;
}

/*
 * Rows a group may hold: enough that each reads about SUB_G_BYTES of G,
 * as many systems as fit their budget, one at least.
 */
static int
group_rows(int f, int width)
{
	size_t		g = ((size_t) f * f * sizeof(float) + SUB_G_BYTES - 1) / SUB_G_BYTES;
	size_t		n = SUB_SYSTEM_FLOATS / system_floats(width);

	if (g < n)
		n = g;
	return n < 1 ? 1 : n > SUB_GROUP_ROWS ? SUB_GROUP_ROWS : (int) n;
}

/*
 * The chunk buffers of the block pass, the products with G of a block,
 * the predictions of a group's cells (of the longest row, or of several
 * rows up to f cells), each row's followed by its ratings where the matrix
 * keeps codes, then the block systems of its rows.
 */
size_t
wals_subspace_scratch(const WalsParams *params, int64_t max_row_nnz)
{
	int			f = params->factors;
	int64_t		cells;
	int			width;

	if (f < 1 || params->block_size < 1)
		return 0;
	width = block_width(params);
	cells = max_row_nnz > f ? max_row_nnz : f;
	return WALS_ALIGN / sizeof(float) + 2 * WALS_SUB_CHUNK * wals_pad(width) +
		whole((size_t) width * group_rows(f, width)) + 2 * whole((size_t) cells) +
		group_rows(f, width) * system_floats(width);
}

/*
 * A's block starts as w0 G_BB + lambda s I and the right-hand side as
 * -w0 (G x)_B - lambda s x_B, padding zero, from gx, (G x)_B of the
 * group's rows (b rows of span); the block pass adds the cells' terms.
 */
static void
block_start(const WalsParams *params, const float *G, const float *gx,
			int span, const SubRow *row, int k0, int b)
{
	int			f = params->factors;
	int			bp = wals_pad(b);
	float		w0 = params->w0;
	float		ls = params->regularization * row->s;
	int			a;
	int			c;

	for (a = 0; a < b; a++)
	{
		const float *g = G + (size_t) (k0 + a) * f + k0;
		float	   *A = row->A + (size_t) a * bp;

		for (c = 0; c < b; c++)
			A[c] = w0 != 0.0f ? w0 * g[c] : 0.0f;
		for (; c < bp; c++)
			A[c] = 0.0f;
		A[a] += ls;
	}
	for (c = 0; c < bp; c++)
		row->rhs[c] = c >= b ? 0.0f :
			(w0 != 0.0f ? -w0 * gx[(size_t) c * span + row->at] : 0.0f) -
			ls * row->x[k0 + c];
}

/*
 * One group through every block.  The step of a block stays in dp until
 * the next block's pass has applied it to the predictions; the last
 * block's is not needed.  A row that fails keeps its status and takes no
 * further steps.
 */
static void
solve_group(const WalsParams *params, const WalsKernels *kern,
			const WalsPassCoef *coef, const float *Y, const float *G,
			const float *X, SubRow *rows, int nrows, float *gx, float *chunk)
{
	int			f = params->factors;
	int			width = block_width(params);
	int			span = rows[nrows - 1].at + 1;
	int			p0 = 0;
	int			pb = 0;
	int			k0;
	int			r;

	for (r = 0; r < nrows; r++)
	{
		int			j;

		/* each prediction is its own dot product: pieces change nothing */
		for (j = 0; j < rows[r].nnz; j += SUB_DOTS_CELLS)
		{
			int			m = rows[r].nnz - j < SUB_DOTS_CELLS ? rows[r].nnz - j : SUB_DOTS_CELLS;

			kern->dots(Y, rows[r].idx + j, m, f, rows[r].x, rows[r].yhat + j);
			wals_poll((int64_t) 2 * m * f);
		}
	}
	for (k0 = 0; k0 < f; k0 += width)
	{
		int			b = f - k0 < width ? f - k0 : width;

		if (params->w0 != 0.0f)
			kern->gemm_nt(G + (size_t) k0 * f, b, X + rows[0].u * f, span, f, gx);
		wals_poll((int64_t) b * span * f);
		for (r = 0; r < nrows; r++)
		{
			SubRow	   *row = &rows[r];

			if (row->status != WALS_OK)
				continue;
			block_start(params, G, gx, span, row, k0, b);
			wals_poll((int64_t) b * b);
			kern->sub_block(Y, row->idx, row->val, row->nnz, f, coef,
							row->yhat, row->dp, p0, pb, k0, b, row->A,
							row->rhs, chunk);
		}
		for (r = 0; r < nrows; r++)
		{
			SubRow	   *row = &rows[r];
			int			c;

			if (row->status != WALS_OK)
				continue;
			wals_poll((int64_t) b * b / 6 * b + (int64_t) b * b);
			if (!kern->chol_solve(row->A, b, row->rhs, row->dp))
				row->status = WALS_ESINGULAR;
			else if (!wals_all_finite(row->dp, b))
				row->status = WALS_ENONFINITE;
			else
				for (c = 0; c < b; c++)
					row->x[k0 + c] += row->dp[c];
		}
		p0 = k0;
		pb = b;
	}
	for (r = 0; r < nrows; r++)
		if (rows[r].status == WALS_OK && !wals_all_finite(rows[r].x, f))
			rows[r].status = WALS_ENONFINITE;
}

/*
 * As wals_solve_rows: s_u, rows without ratings and failures alike; the
 * failing row reported is the first in order, as there.
 */
WalsStatus
wals_solve_rows_subspace(const WalsParams *params, const WalsCsr *R,
						 const float *Y, const float *G, float *X,
						 int64_t lo, int64_t hi, float *scratch,
						 int64_t *bad_row)
{
	int			f = params->factors;
	int			width = block_width(params);
	int			max_rows = group_rows(f, width);
	int64_t		max_cells = f;
	const WalsKernels *kern = wals_kernels();
	WalsCellLinear cl = wals_cell_linear(params);
	WalsPassCoef coef = {cl.cp0, cl.cp1, cl.cp_from, -cl.cw0, -cl.cw1};
	float	   *chunk = align_floats(scratch);
	float	   *gx = chunk + 2 * WALS_SUB_CHUNK * wals_pad(width);
	float	   *work = gx + whole((size_t) width * max_rows);
	SubRow		rows[SUB_GROUP_ROWS];
	int64_t		u = lo;

	while (u < hi)
	{
		float	   *yhat = work;
		float	   *sys;
		int64_t		cells = 0;
		int			nrows = 0;
		int			r;

		/*
		 * A group is consecutive rows of X, so that one product with G
		 * serves them all; rows without ratings in it are zero, as they
		 * are to be, and need no more.
		 */
		for (; u < hi && (nrows == 0 || u - rows[0].u < max_rows); u++)
		{
			int64_t		start = R->indptr[u];
			int64_t		nnz = R->indptr[u + 1] - start;
			SubRow	   *row = &rows[nrows];

			if (nnz == 0)
			{
				memset(X + u * f, 0, sizeof(float) * f);
				continue;
			}
			if (nrows > 0 && cells + 2 * nnz > 2 * max_cells)
				break;
			row->u = u;
			row->at = nrows > 0 ? (int) (u - rows[0].u) : 0;
			row->idx = R->indices + start;
			row->yhat = yhat + cells;
			row->val = wals_csr_values(R, start, nnz, row->yhat + whole((size_t) nnz));
			row->nnz = (int) nnz;
			row->s = (float) wals_row_scale(params, nnz, R->ncols);
			row->x = X + u * f;
			row->status = WALS_OK;
			cells += 2 * whole((size_t) nnz);
			nrows++;
		}
		sys = yhat + cells;
		for (r = 0; r < nrows; r++)
		{
			rows[r].A = sys + r * system_floats(width);
			rows[r].rhs = rows[r].A + (size_t) width * wals_pad(width);
			rows[r].dp = rows[r].rhs + wals_pad(width);
		}
		if (nrows == 0)
			break;
		solve_group(params, kern, &coef, Y, G, X, rows, nrows, gx, chunk);
		for (r = 0; r < nrows; r++)
			if (rows[r].status != WALS_OK)
			{
				if (bad_row)
					*bad_row = rows[r].u;
				return rows[r].status;
			}
	}
	return WALS_OK;
}
