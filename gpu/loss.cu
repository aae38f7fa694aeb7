/*
 * loss.cu
 *	  The loss of the factors on the device, and the quartic of the loss
 *	  along a line that ALS-NCG searches: per row over its cells, in pieces
 *	  of WALS_CUDA_LONG_ROW cells a block, summed in double as src/core
 *	  sums them.
 */
#include <cmath>

#include "kernels.h"

/* Row of piece q, and its cells [*start, *end); the first piece of a row is q < nrows. */
__device__ inline long long
piece_cells(const Pieces &P, const long long *__restrict__ indptr, long long nrows,
			long long q, long long *start, long long *end)
{
	long long	u = q < nrows ? q : P.row[q - nrows];

	*start = q < nrows ? indptr[u] : P.start[q - nrows];
	*end = indptr[u + 1] - *start > WALS_CUDA_LONG_ROW ? *start + WALS_CUDA_LONG_ROW :
		indptr[u + 1];
	return u;
}

/*
 * Each piece's part of the loss, in double as src/core sums it: over its
 * cells c (p - x.y)^2 - w0 (x.y)^2, and in a row's first piece lambda s
 * |x|^2; with cells == false only the regularisation (the item side's
 * share).
 */
__global__ void
loss_rows(Weights w, RowScale rs, bool cells, Pieces P, const long long *__restrict__ indptr,
		  const int *__restrict__ indices, const float *__restrict__ values,
		  const float *__restrict__ X, const float *__restrict__ Y,
		  long long nrows, int f, double *out)
{
	__shared__ double red[WALS_CUDA_WARPS];
	long long	q = blockIdx.x;
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;
	long long	start;
	long long	end;
	long long	u;
	int			nnz;
	double		total = 0.0;
	const float *x;

	if (q >= nrows + P.extra || (!cells && q >= nrows))
		return;
	u = piece_cells(P, indptr, nrows, q, &start, &end);
	nnz = (int) (end - start);
	x = X + (size_t) u * f;
	if (cells)
		for (int i = warp; i < nnz; i += WALS_CUDA_WARPS)
		{
			float		d = wals_cuda_warp_dot(x, Y + (size_t) indices[start + i] * f, f, lane);

			if (lane == 0)
			{
				float		c;
				float		p;

				cell_weights(w, values[start + i], &c, &p);
				total += (double) c * ((double) p - d) * ((double) p - d) -
					(double) w.w0 * d * d;
			}
		}
	if (q < nrows && threadIdx.x < 32)
	{
		double		sq = 0.0;
		double		s = row_scale(rs, indptr[u + 1] - indptr[u]);

		for (int k = lane; k < f; k += 32)
			sq += (double) x[k] * x[k];
		for (int off = 16; off > 0; off >>= 1)
			sq += __shfl_down_sync(0xffffffffu, sq, off);
		if (lane == 0)
			total += w.lambda * s * sq;
	}
	if (lane == 0)
		red[warp] = total;
	__syncthreads();
	if (threadIdx.x == 0)
	{
		double		sum = 0.0;

		for (int i = 0; i < WALS_CUDA_WARPS; i++)
			sum += red[i];
		out[q] = sum;
	}
}

/*
 * A warp's share of the cells of a piece (start to end) in line_rows'
 * terms: its lane 0 adds them to acc.
 */
static __device__ void
line_cells(Weights w, long long start, int nnz, const int *__restrict__ indices,
		   const float *__restrict__ values, const float *__restrict__ x,
		   const float *__restrict__ dx, const float *__restrict__ Y,
		   const float *__restrict__ DY, int f, int lane, int warp, double *acc)
{
	for (int i = warp; i < nnz; i += WALS_CUDA_WARPS)
	{
		const float *y = Y + (size_t) indices[start + i] * f;
		const float *dy = DY + (size_t) indices[start + i] * f;
		float		a0 = 0.0f;
		float		a1 = 0.0f;
		float		a2 = 0.0f;

		for (int k = lane; k < f; k += 32)
		{
			a0 += x[k] * y[k];
			a1 += x[k] * dy[k] + dx[k] * y[k];
			a2 += dx[k] * dy[k];
		}
		for (int off = 16; off > 0; off >>= 1)
		{
			a0 += __shfl_down_sync(0xffffffffu, a0, off);
			a1 += __shfl_down_sync(0xffffffffu, a1, off);
			a2 += __shfl_down_sync(0xffffffffu, a2, off);
		}
		if (lane == 0)
		{
			float		c;
			float		p;
			double		e;
			double		cp;

			cell_weights(w, values[start + i], &c, &p);
			e = (double) c - (double) w.w0;
			cp = (double) c * (double) p;
			acc[0] += e * a0 * a0 - 2.0 * cp * a0 + cp * p;
			acc[1] += 2.0 * e * a0 * a1 - 2.0 * cp * a1;
			acc[2] += e * ((double) a1 * a1 + 2.0 * a0 * a2) - 2.0 * cp * a2;
			acc[3] += 2.0 * e * a1 * a2;
			acc[4] += e * a2 * a2;
		}
	}
}

/*
 * The row's regularisation, ls |x + t dx|^2, in line_rows' terms, summed
 * by one warp: its lane 0 adds it to acc.
 */
static __device__ void
line_reg(double ls, const float *__restrict__ x, const float *__restrict__ dx, int f,
		 int lane, double *acc)
{
	double		xx = 0.0;
	double		xd = 0.0;
	double		dd = 0.0;

	for (int k = lane; k < f; k += 32)
	{
		xx += (double) x[k] * x[k];
		xd += (double) x[k] * dx[k];
		dd += (double) dx[k] * dx[k];
	}
	for (int off = 16; off > 0; off >>= 1)
	{
		xx += __shfl_down_sync(0xffffffffu, xx, off);
		xd += __shfl_down_sync(0xffffffffu, xd, off);
		dd += __shfl_down_sync(0xffffffffu, dd, off);
	}
	if (lane == 0)
	{
		acc[0] += ls * xx;
		acc[1] += 2.0 * ls * xd;
		acc[2] += ls * dd;
	}
}

/*
 * Each piece's terms of L(z + t d) as the coefficients of t^0 to t^4, in
 * double as src/core's wals_line_rows sums them.  Along the line a cell's
 * x.y is a0 + a1 t + a2 t^2 (a0 = x.y, a1 = x.dy + dx.y, a2 = dx.dy), and
 * its term c (p - x.y)^2 - w0 (x.y)^2 = (c - w0) (x.y)^2 - 2 c p x.y + c p^2;
 * the row's regularisation, lambda s |x + t dx|^2, goes with its first
 * piece.  With cells false only the regularisation (the item side's share).
 */
__global__ void
line_rows(Weights w, RowScale rs, bool cells, Pieces P, const long long *__restrict__ indptr,
		  const int *__restrict__ indices, const float *__restrict__ values,
		  const float *__restrict__ X, const float *__restrict__ DX,
		  const float *__restrict__ Y, const float *__restrict__ DY,
		  long long nrows, int f, double *out)
{
	__shared__ double red[WALS_CUDA_WARPS][WALS_CUDA_LINE_TERMS];
	long long	q = blockIdx.x;
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;
	long long	start;
	long long	end;
	long long	u;
	int			nnz;
	double		acc[WALS_CUDA_LINE_TERMS] = {};
	const float *x;
	const float *dx;

	if (q >= nrows + P.extra || (!cells && q >= nrows))
		return;
	u = piece_cells(P, indptr, nrows, q, &start, &end);
	nnz = (int) (end - start);
	x = X + (size_t) u * f;
	dx = DX + (size_t) u * f;
	if (cells)
		line_cells(w, start, nnz, indices, values, x, dx, Y, DY, f, lane, warp, acc);
	if (q < nrows && warp == 0)
		line_reg((double) w.lambda * row_scale(rs, indptr[u + 1] - indptr[u]), x, dx, f,
				 lane, acc);
	if (lane == 0)
		for (int k = 0; k < WALS_CUDA_LINE_TERMS; k++)
			red[warp][k] = acc[k];
	__syncthreads();
	if (threadIdx.x < WALS_CUDA_LINE_TERMS)
	{
		double		sum = 0.0;

		for (int i = 0; i < WALS_CUDA_WARPS; i++)
			sum += red[i][threadIdx.x];
		out[(size_t) q * WALS_CUDA_LINE_TERMS + threadIdx.x] = sum;
	}
}
