/*
 * cg.cu
 *	  Conjugate gradient for the rows of one side on the device, one block a
 *	  row, with cg_steps steps warm started from the current factors, as
 *	  src/core/solve.c steps them (see train.cu for the system).  A row of
 *	  more than WALS_CUDA_LONG_ROW cells is solved across blocks, its
 *	  products with A split into chunks of WALS_CUDA_CHUNK cells (long_*).
 */
#include <cmath>

#include "kernels.h"

/* Sum of v over the block; every thread gets the result. */
__device__ float
block_sum(float v, float *red)
{
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;

	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, off);
	__syncthreads();
	if (lane == 0)
		red[warp] = v;
	__syncthreads();
	v = 0.0f;
	for (int w = 0; w < WALS_CUDA_WARPS; w++)
		v += red[w];
	return v;
}

/*
 * out = sum over the row's cells of t_i y_i, with t_i = a_i - b_i d_i and
 * d_i = y_i.v: (a, b) = (c p, c - w0) gives the first residual's sparse
 * part, (0, -(c - w0)) the sparse part of A v.  Cells go a tile at a time:
 * each warp computes the dots of its cells of the tile, then every thread
 * accumulates its components over the tile.
 */
__device__ void
row_pass(const Weights &w, const float *__restrict__ Y, const int *__restrict__ idx,
		 const float *__restrict__ val, int nnz, int f, const float *v,
		 bool residual, float *out, float *tile)
{
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;

	for (int k = threadIdx.x; k < f; k += blockDim.x)
		out[k] = 0.0f;
	for (int start = 0; start < nnz; start += 32)
	{
		int			n = min(32, nnz - start);

		__syncthreads();
		for (int i = warp; i < n; i += WALS_CUDA_WARPS)
		{
			float		d = wals_cuda_warp_dot(Y + (size_t) idx[start + i] * f, v, f, lane);

			if (lane == 0)
			{
				float		c;
				float		p;

				cell_weights(w, val[start + i], &c, &p);
				tile[i] = residual ? c * p - (c - w.w0) * d : (c - w.w0) * d;
			}
		}
		__syncthreads();
		for (int k = threadIdx.x; k < f; k += blockDim.x)
		{
			float		acc = out[k];

			for (int i = 0; i < n; i++)
				acc += tile[i] * Y[(size_t) idx[start + i] * f + k];
			out[k] = acc;
		}
	}
	__syncthreads();
}

/*
 * out += alpha G v, G full symmetric f x f.  Thread k sums column k, which
 * is row k as G is symmetric, so that at each j the lanes of a warp read
 * consecutive floats of row j, one transaction rather than 32; through
 * __ldg, the read-only path, whose loads the emulation checks coalesce.
 */
__device__ void
symv(const float *__restrict__ G, int f, float alpha, const float *v, float *out)
{
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		float		acc = 0.0f;

		for (int j = 0; j < f; j++)
			acc += __ldg(&G[(size_t) j * f + k]) * v[j];
		out[k] += alpha * acc;
	}
	__syncthreads();
}

/*
 * CG's start for a row once r holds the sparse part of b - A x: the Gram's
 * and the regularisation's parts (reg = lambda s), p = r; returns r.r.
 */
__device__ float
cg_start(const Weights &w, const float *__restrict__ G, int f, float reg, const float *x,
		 float *r, float *p, float *red)
{
	float		part = 0.0f;

	if (w.w0 != 0.0f)
		symv(G, f, -w.w0, x, r);
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		r[k] -= reg * x[k];
		p[k] = r[k];
		part += r[k] * r[k];
	}
	return block_sum(part, red);
}

#define CG_GO		0			/* stepped; more steps may follow */
#define CG_STOP		1			/* no curvature left along p: x stays */
#define CG_FAILED	2			/* p.Ap not finite */

/*
 * One CG step for a row once ap holds the sparse part of A p: the Gram's
 * and the regularisation's parts, then x, r and p move and *rs goes from
 * r.r before the step to r.r after it.  Every thread gets the same
 * outcome, a block sum's, so the whole block leaves the loop together.
 */
__device__ int
cg_step(const Weights &w, const float *__restrict__ G, int f, float reg, float *x, float *r,
		float *p, float *ap, float *rs, float *red)
{
	float		part = 0.0f;
	float		pap;
	float		a;
	float		rsnew;

	if (w.w0 != 0.0f)
		symv(G, f, w.w0, p, ap);
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		ap[k] += reg * p[k];
		part += p[k] * ap[k];
	}
	pap = block_sum(part, red);
	if (!isfinite(pap))
		return CG_FAILED;
	if (pap <= 0.0f)
		return CG_STOP;
	a = *rs / pap;
	part = 0.0f;
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		x[k] += a * p[k];
		r[k] -= a * ap[k];
		part += r[k] * r[k];
	}
	rsnew = block_sum(part, red);
	for (int k = threadIdx.x; k < f; k += blockDim.x)
		p[k] = r[k] + (rsnew / *rs) * p[k];
	__syncthreads();
	*rs = rsnew;
	return CG_GO;
}

/*
 * Conjugate gradient for each row of X, one block a row, but the long
 * rows, which the long_* kernels solve.  Shared memory:
 * x, r, p, Ap (f each), the tile's 32 weights and the warps' partial sums.
 * As src/core's solve_row_cg, a residual or a curvature p.Ap that is not
 * finite fails the row (the loop's tests would read a NaN as converged and
 * keep the old x), as does a result that is not finite: the row lowers
 * *bad with atomicMin, whichever block gets there first, so that the
 * lowest failing row is named, as the CPU names it.  rsold and p.Ap are
 * block sums, the same in every thread, so the whole block leaves the
 * loop together.
 */
__global__ void
cg_rows(Weights w, RowScale rs, int cg_steps, const long long *__restrict__ indptr,
		const int *__restrict__ indices, const float *__restrict__ values,
		const float *__restrict__ Y, const float *__restrict__ G, float *X,
		long long nrows, int f, unsigned long long *bad)
{
	WALS_DYNAMIC_SHARED(float, shm);
	float	   *x = shm;
	float	   *r = x + f;
	float	   *p = r + f;
	float	   *ap = p + f;
	float	   *tile = ap + f;
	float	   *red = tile + 32;
	long long	u = blockIdx.x;
	long long	start;
	int			nnz;
	float		s;
	float		rsold;
	bool		failed;

	if (u >= nrows)
		return;
	start = indptr[u];
	nnz = (int) (indptr[u + 1] - start);
	if (nnz > WALS_CUDA_LONG_ROW)
		return;
	if (nnz == 0)
	{
		for (int k = threadIdx.x; k < f; k += blockDim.x)
			X[(size_t) u * f + k] = 0.0f;
		return;
	}
	s = (float) row_scale(rs, nnz);
	for (int k = threadIdx.x; k < f; k += blockDim.x)
		x[k] = X[(size_t) u * f + k];
	__syncthreads();

	row_pass(w, Y, indices + start, values + start, nnz, f, x, true, r, tile);
	rsold = cg_start(w, G, f, w.lambda * s, x, r, p, red);
	failed = !isfinite(rsold);
	for (int step = 0; !failed && step < cg_steps && rsold >= WALS_CUDA_CG_TINY; step++)
	{
		int			outcome;

		row_pass(w, Y, indices + start, values + start, nnz, f, p, false, ap, tile);
		outcome = cg_step(w, G, f, w.lambda * s, x, r, p, ap, &rsold, red);
		failed = outcome == CG_FAILED;
		if (outcome != CG_GO)
			break;
	}
	if (failed && threadIdx.x == 0)
		atomicMin(bad, (unsigned long long) u);
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		if (!isfinite(x[k]))
			atomicMin(bad, (unsigned long long) u);
		X[(size_t) u * f + k] = x[k];
	}
}

/* Chunk blockIdx.x's share of out = sum t_i y_i along x (residual) or p. */
__global__ void
long_pass(Weights w, LongRows L, const long long *__restrict__ indptr,
		  const int *__restrict__ indices, const float *__restrict__ values,
		  const float *__restrict__ Y, int f, bool residual)
{
	__shared__ float tile[32];
	int			slot = L.chunk_slot[blockIdx.x];
	long long	start = L.chunk_start[blockIdx.x];
	long long	end = indptr[L.rows[slot] + 1];
	int			n = (int) (end - start < WALS_CUDA_CHUNK ? end - start : WALS_CUDA_CHUNK);
	const float *v = L.vec + (size_t) slot * 4 * f + (residual ? 0 : 2 * (size_t) f);

	if (L.state[slot] != LONG_RUNNING)
		return;
	row_pass(w, Y, indices + start, values + start, n, f, v, residual,
			 L.partial + (size_t) blockIdx.x * f, tile);
}

/* out = the sum of slot's chunks' partial sums, in order. */
__device__ void
long_gather(const LongRows &L, int slot, int f, float *out)
{
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		float		acc = 0.0f;

		for (int c = L.first_chunk[slot]; c < L.first_chunk[slot + 1]; c++)
			acc += L.partial[(size_t) c * f + k];
		out[k] = acc;
	}
	__syncthreads();
}

/* x of each slot from the factors, before the first pass. */
__global__ void
long_load(LongRows L, const float *__restrict__ X, int f)
{
	float	   *x = L.vec + (size_t) blockIdx.x * 4 * f;

	for (int k = threadIdx.x; k < f; k += blockDim.x)
		x[k] = X[(size_t) L.rows[blockIdx.x] * f + k];
	if (threadIdx.x == 0)
		L.state[blockIdx.x] = LONG_RUNNING;
}

/* r = b - A x and p = r of each slot, from the residual pass's chunks. */
__global__ void
long_start(Weights w, RowScale rs, LongRows L, const long long *__restrict__ indptr,
		   const float *__restrict__ G, int f, int cg_steps)
{
	__shared__ float red[WALS_CUDA_WARPS];
	int			slot = blockIdx.x;
	long long	u = L.rows[slot];
	float		s = (float) row_scale(rs, indptr[u + 1] - indptr[u]);
	float	   *x = L.vec + (size_t) slot * 4 * f;
	float	   *r = x + f;
	float	   *p = r + f;
	float		rsold;

	long_gather(L, slot, f, r);
	rsold = cg_start(w, G, f, w.lambda * s, x, r, p, red);
	if (threadIdx.x == 0)
	{
		L.rsold[slot] = rsold;
		L.state[slot] = !isfinite(rsold) ? LONG_FAILED :
			cg_steps > 0 && rsold >= WALS_CUDA_CG_TINY ? LONG_RUNNING : LONG_DONE;
	}
}

/* One CG step of each running slot, from the pass along p's chunks. */
__global__ void
long_step(Weights w, RowScale rs, LongRows L, const long long *__restrict__ indptr,
		  const float *__restrict__ G, int f, bool last)
{
	__shared__ float red[WALS_CUDA_WARPS];
	int			slot = blockIdx.x;
	long long	u = L.rows[slot];
	float		s = (float) row_scale(rs, indptr[u + 1] - indptr[u]);
	float	   *x = L.vec + (size_t) slot * 4 * f;
	float	   *r = x + f;
	float	   *p = r + f;
	float	   *ap = p + f;
	float		rsold = L.rsold[slot];
	int			outcome;

	if (L.state[slot] != LONG_RUNNING)
		return;
	long_gather(L, slot, f, ap);
	outcome = cg_step(w, G, f, w.lambda * s, x, r, p, ap, &rsold, red);
	if (threadIdx.x == 0)
	{
		L.rsold[slot] = rsold;
		L.state[slot] = outcome == CG_FAILED ? LONG_FAILED :
			outcome == CG_STOP || last || !(rsold >= WALS_CUDA_CG_TINY) ? LONG_DONE :
			LONG_RUNNING;
	}
}

/* x of each slot into the factors; a failed or non-finite one lowers *bad. */
__global__ void
long_store(LongRows L, float *X, int f, unsigned long long *bad)
{
	long long	u = L.rows[blockIdx.x];
	const float *x = L.vec + (size_t) blockIdx.x * 4 * f;

	if (L.state[blockIdx.x] == LONG_FAILED && threadIdx.x == 0)
		atomicMin(bad, (unsigned long long) u);
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		if (!isfinite(x[k]))
			atomicMin(bad, (unsigned long long) u);
		X[(size_t) u * f + k] = x[k];
	}
}
