/*
 * vectors.cu
 *	  Operations on vectors of the size of all factors, for ALS-NCG:
 *	  linear combinations, dot products and the sums of the line's Gram
 *	  terms, grid-stride over the whole vector, and the reduction of rows'
 *	  sums; each reduction sums its grid's partial sums in the same order
 *	  every time.
 */
#include <cmath>

#include "kernels.h"

/*
 * dst = a x + b y over n floats, in float as src/train's CPU engine; an
 * operand whose coefficient is 0 is not read (it may hold anything, NaN
 * included).  dst may be x or y: each element is read and written by one
 * thread.
 */
__global__ void
combine_floats(float *dst, double a, const float *x, double b, const float *y, size_t n)
{
	float		fa = (float) a;
	float		fb = (float) b;

	for (size_t k = (size_t) blockIdx.x * blockDim.x + threadIdx.x; k < n;
		 k += (size_t) gridDim.x * blockDim.x)
	{
		float		v = 0.0f;

		if (a != 0.0)
			v += fa * x[k];
		if (b != 0.0)
			v += fb * y[k];
		dst[k] = v;
	}
}

/*
 * The sums of this block (of a grid of WALS_CUDA_ACC_BLOCKS) into
 * parts[WALS_CUDA_ACC_TERMS * blockIdx.x + j], j < terms: each thread's
 * own, then the warps', in double.
 */
__device__ void
acc_store(double *acc, int terms, double *parts)
{
	__shared__ double red[WALS_CUDA_ACC_THREADS / 32][WALS_CUDA_ACC_TERMS];
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;

	for (int j = 0; j < terms; j++)
	{
		for (int off = 16; off > 0; off >>= 1)
			acc[j] += __shfl_down_sync(0xffffffffu, acc[j], off);
		if (lane == 0)
			red[warp][j] = acc[j];
	}
	__syncthreads();
	if (threadIdx.x < terms)
	{
		double		sum = 0.0;

		for (int i = 0; i < WALS_CUDA_ACC_THREADS / 32; i++)
			sum += red[i][threadIdx.x];
		parts[WALS_CUDA_ACC_TERMS * blockIdx.x + threadIdx.x] = sum;
	}
}

/* x.y over n floats, this block's share; see acc_store. */
__global__ void __launch_bounds__(WALS_CUDA_ACC_THREADS)
dot_floats(const float *__restrict__ x, const float *__restrict__ y, size_t n, double *parts)
{
	double		acc[1] = {0.0};

	for (size_t k = (size_t) blockIdx.x * blockDim.x + threadIdx.x; k < n;
		 k += (size_t) gridDim.x * blockDim.x)
		acc[0] += (double) x[k] * y[k];
	acc_store(acc, 1, parts);
}

/*
 * Over f x f matrices, this block's share of P0.Q, P1.Q, P2.Q and P1.Q^T
 * (the sums of entrywise products), for the unobserved term of a line.
 */
__global__ void __launch_bounds__(WALS_CUDA_ACC_THREADS)
pair_sums(const float *__restrict__ P0, const float *__restrict__ P1,
		  const float *__restrict__ P2, const float *__restrict__ Q, int f, double *parts)
{
	double		acc[WALS_CUDA_PAIR_TERMS] = {};
	size_t		n = (size_t) f * f;

	for (size_t e = (size_t) blockIdx.x * blockDim.x + threadIdx.x; e < n;
		 e += (size_t) gridDim.x * blockDim.x)
	{
		double		q = Q[e];

		acc[0] += (double) P0[e] * q;
		acc[1] += (double) P1[e] * q;
		acc[2] += (double) P2[e] * q;
		acc[3] += (double) P1[e] * Q[(e % f) * f + e / f];
	}
	acc_store(acc, WALS_CUDA_PAIR_TERMS, parts);
}

/*
 * The sums over nrows rows of their terms each (rows[terms r + j], j <
 * terms), this block's share: the loss and the line are summed on the
 * device, never downloaded a row at a time.
 */
__global__ void __launch_bounds__(WALS_CUDA_ACC_THREADS)
row_sums(const double *__restrict__ rows, long long nrows, int terms, double *parts)
{
	double		acc[WALS_CUDA_ACC_TERMS] = {};

	for (long long r = (long long) blockIdx.x * blockDim.x + threadIdx.x; r < nrows;
		 r += (long long) gridDim.x * blockDim.x)
		for (int j = 0; j < terms; j++)
			acc[j] += rows[terms * r + j];
	acc_store(acc, terms, parts);
}
