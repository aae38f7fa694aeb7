/*
 * cholesky.cu
 *	  The exact row solves of a training on a CUDA device, a batch of rows
 *	  at a time.
 *
 * Row u of the side being solved has the system src/core's Cholesky solver
 * forms (solve.c):
 *
 *	  A_u = w0 G + sum_i (c_i - w0) y_i y_i^T + lambda s_u I,	b_u = sum_i c_i p_i y_i
 *
 * A batch goes through three steps: one thread block per row builds A_u and
 * b_u in global memory, cuSOLVER's batched potrf and potrs factor and solve
 * every system of the batch, and one block per row copies x_u into the
 * factors.  The batch's buffers and the pointer arrays cuSOLVER takes are
 * allocated once per training and reused by every batch of every
 * half-sweep, so a sweep allocates nothing; the batch is sized from the
 * device memory that is free when the training starts.
 *
 * A_u is written whole, both triangles, each entry computed once: it is then
 * the same matrix read row- or column-major, and which triangle cuSOLVER
 * reads cannot matter.  A row whose system is not positive definite, or
 * whose solution is not finite, is reported by its index, the least one of
 * the half-sweep, which is the row src/core stops at.
 */
#include <cmath>
#include <cstdio>
#include <new>

#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "engine.h"

/*
 * The block that builds a system: 256 threads, each accumulating a 4 x 4
 * block of a 64 x 64 tile of A_u in registers, from the row's cells staged
 * 32 at a time in shared memory (16 KiB), so that a factor row is read
 * from global memory once per tile rather than once per entry.
 */
#define CHOL_THREADS	256
#define CHOL_SIDE		16
#define CHOL_TILE		64
#define CHOL_SUB		(CHOL_TILE / CHOL_SIDE)
#define CHOL_CHUNK		32
#define CHOL_STORE_THREADS	128

static_assert(CHOL_SIDE * CHOL_SIDE == CHOL_THREADS, "one thread per 4 x 4 block of a tile");
static_assert(CHOL_CHUNK <= CHOL_THREADS, "one thread stages each cell of a chunk");

/*
 * Past a few thousand systems in flight every SM is busy, and a larger
 * batch only saves launches while taking memory other trainings on the
 * device could use.  The bound on rows also keeps every grid of a batch,
 * ours and cuSOLVER's, far inside the launch limits.
 */
#define CHOL_BATCH_BYTES	((size_t) 1 << 30)
#define CHOL_BATCH_ROWS		32768

/* What a row's system takes from the training's parameters. */
struct SystemParams
{
	int			implicit;
	float		alpha;
	float		w0;
	float		lambda;
};

/*
 * Confidence c and target p of a cell with merged rating r: src/core's
 * wals_cell_weights, as train.cu's CG kernel has them.  check_train holds
 * all three to the same loss.
 */
__device__ inline void
system_weights(const SystemParams &w, float r, float *c, float *p)
{
	if (w.implicit)
	{
		*c = 1.0f + w.alpha * r;
		*p = 1.0f;
	}
	else
	{
		*c = 1.0f;
		*p = r;
	}
}

/*
 * A_u (f x f) and b_u for row lo + blockIdx.x, into slot blockIdx.x of the
 * batch.  Only the tiles on or below the diagonal are accumulated, and in a
 * diagonal tile only the entries on or below it, each written to both
 * triangles, so that every entry has one writer.  A row without ratings
 * gets A = I and b = 0: its solution is then exactly the zero vector
 * src/core gives it, and the factorization never reads a stale system.
 */
static __global__ void __launch_bounds__(CHOL_THREADS)
chol_build(SystemParams w, const long long *__restrict__ indptr,
		   const int *__restrict__ indices, const float *__restrict__ values,
		   const float *__restrict__ Y, const float *__restrict__ G, long long lo,
		   int f, float *__restrict__ A, float *__restrict__ b)
{
	__shared__ float tile_rows[CHOL_CHUNK][CHOL_TILE];
	__shared__ float tile_cols[CHOL_CHUNK][CHOL_TILE];
	__shared__ int chunk_cell[CHOL_CHUNK];
	__shared__ float chunk_weight[CHOL_CHUNK];
	long long	u = lo + blockIdx.x;
	long long	start = indptr[u];
	int			nnz = (int) (indptr[u + 1] - start);
	float	   *Au = A + (size_t) blockIdx.x * f * f;
	float	   *bu = b + (size_t) blockIdx.x * f;
	int			tx = threadIdx.x % CHOL_SIDE;
	int			ty = threadIdx.x / CHOL_SIDE;
	int			tiles = (f + CHOL_TILE - 1) / CHOL_TILE;
	float		s = w.implicit ? 1.0f : (float) nnz;

	if (nnz == 0)
	{
		for (size_t e = threadIdx.x; e < (size_t) f * f; e += blockDim.x)
			Au[e] = e % (f + 1) == 0 ? 1.0f : 0.0f;
		for (int k = threadIdx.x; k < f; k += blockDim.x)
			bu[k] = 0.0f;
		return;
	}

	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		float		acc = 0.0f;

		for (int i = 0; i < nnz; i++)
		{
			float		c;
			float		p;

			system_weights(w, values[start + i], &c, &p);
			acc += c * p * Y[(size_t) indices[start + i] * f + k];
		}
		bu[k] = acc;
	}

	for (int ta = 0; ta < tiles; ta++)
		for (int tc = 0; tc <= ta; tc++)
		{
			float		acc[CHOL_SUB][CHOL_SUB] = {};

			for (int first = 0; first < nnz; first += CHOL_CHUNK)
			{
				int			n = min(CHOL_CHUNK, nnz - first);

				/* the previous chunk's tiles are consumed before reuse */
				__syncthreads();
				if (threadIdx.x < n)
				{
					float		c;
					float		p;

					system_weights(w, values[start + first + threadIdx.x], &c, &p);
					chunk_cell[threadIdx.x] = indices[start + first + threadIdx.x];
					chunk_weight[threadIdx.x] = c - w.w0;
				}
				__syncthreads();
				for (int e = threadIdx.x; e < n * CHOL_TILE; e += blockDim.x)
				{
					int			i = e / CHOL_TILE;
					int			k = e % CHOL_TILE;
					int			row = ta * CHOL_TILE + k;
					int			col = tc * CHOL_TILE + k;
					const float *y = Y + (size_t) chunk_cell[i] * f;

					tile_rows[i][k] = row < f ? chunk_weight[i] * y[row] : 0.0f;
					tile_cols[i][k] = col < f ? y[col] : 0.0f;
				}
				__syncthreads();
				for (int i = 0; i < n; i++)
					for (int bi = 0; bi < CHOL_SUB; bi++)
						for (int bj = 0; bj < CHOL_SUB; bj++)
							acc[bi][bj] += tile_rows[i][ty + CHOL_SIDE * bi] *
								tile_cols[i][tx + CHOL_SIDE * bj];
			}

			for (int bi = 0; bi < CHOL_SUB; bi++)
				for (int bj = 0; bj < CHOL_SUB; bj++)
				{
					int			row = ta * CHOL_TILE + ty + CHOL_SIDE * bi;
					int			col = tc * CHOL_TILE + tx + CHOL_SIDE * bj;
					float		v = acc[bi][bj];

					if (row >= f || col >= f || (ta == tc && row < col))
						continue;
					/* as src/core, G is not read when w0 is 0 */
					if (w.w0 != 0.0f)
						v += w.w0 * G[(size_t) row * f + col];
					if (row == col)
						v += w.lambda * s;
					Au[(size_t) col * f + row] = v;
					Au[(size_t) row * f + col] = v;
				}
		}
}

/*
 * x_u, left in slot blockIdx.x of b by potrs, into row lo + blockIdx.x of
 * X.  *bad keeps the least 2 u + 1 over rows whose solution is not finite
 * and 2 u over rows whose system potrf found not positive definite; those
 * keep their old factors.
 */
static __global__ void
chol_store(const float *__restrict__ b, const int *__restrict__ info, long long lo, int f,
		   float *__restrict__ X, unsigned long long *bad)
{
	long long	u = lo + blockIdx.x;
	const float *x = b + (size_t) blockIdx.x * f;

	if (info[blockIdx.x] != 0)
	{
		if (threadIdx.x == 0)
			atomicMin(bad, 2 * (unsigned long long) u);
		return;
	}
	for (int k = threadIdx.x; k < f; k += blockDim.x)
	{
		if (!isfinite(x[k]))
			atomicMin(bad, 2 * (unsigned long long) u + 1);
		X[(size_t) u * f + k] = x[k];
	}
}

/* cuSOLVER's batched calls take a device array of pointers to the systems. */
static __global__ void
chol_pointers(float *A, float *b, int f, long long rows, float **Aptr, float **bptr)
{
	long long	j = (long long) blockIdx.x * blockDim.x + threadIdx.x;

	if (j < rows)
	{
		Aptr[j] = A + (size_t) j * f * f;
		bptr[j] = b + (size_t) j * f;
	}
}

/* The batch: rows systems of f unknowns, reused by every half-sweep. */
struct CholeskySolver
{
	SystemParams params;
	int			f;
	long long	rows;
	cusolverDnHandle_t handle;
	float	   *A;				/* rows x f x f */
	float	   *b;				/* rows x f, then the solutions */
	float	  **Aptr;
	float	  **bptr;
	int		   *info;			/* potrf's rows entries, then potrs's */
	unsigned long long *bad;
};

#define SOLVER_TRY(call, what) \
	do { \
		cusolverStatus_t st_ = (call); \
		if (st_ != CUSOLVER_STATUS_SUCCESS) \
		{ \
			char		why_[48]; \
			snprintf(why_, sizeof(why_), "cuSOLVER status %d", (int) st_); \
			return fail(err, st_ == CUSOLVER_STATUS_ALLOC_FAILED ? WALS_CUDA_ENOMEM : \
						WALS_CUDA_EDEVICE, (what), why_); \
		} \
	} while (0)

/*
 * Device memory of a batch of rows systems: A and b, the two pointer
 * arrays, potrf's and potrs's info, and the failing row.
 */
size_t
wals_cuda_cholesky_bytes(int f, long long rows)
{
	size_t		per_row = sizeof(float) * ((size_t) f * f + f) + 2 * sizeof(float *) +
		2 * sizeof(int);

	return (size_t) rows * per_row + sizeof(unsigned long long);
}

/*
 * Rows per batch given spare bytes of device memory beyond what the rest of
 * the training, one row's system included, needs: further rows take at
 * most half of them, leaving the rest to cuSOLVER's workspace and to other
 * processes, and no more than the larger side has.
 */
long long
wals_cuda_cholesky_rows(int f, long long most, size_t spare)
{
	size_t		room = spare / 2 < CHOL_BATCH_BYTES ? spare / 2 : CHOL_BATCH_BYTES;
	long long	rows = 1 + (long long) (room / wals_cuda_cholesky_bytes(f, 1));

	if (rows > CHOL_BATCH_ROWS)
		rows = CHOL_BATCH_ROWS;
	if (rows > most)
		rows = most;
	return rows > 1 ? rows : 1;
}

void
wals_cuda_cholesky_end(CholeskySolver *c)
{
	if (c == NULL)
		return;
	cudaFree(c->A);
	cudaFree(c->b);
	cudaFree(c->Aptr);
	cudaFree(c->bptr);
	cudaFree(c->info);
	cudaFree(c->bad);
	if (c->handle != NULL)
		cusolverDnDestroy(c->handle);
	delete c;
}

static int
allocate(CholeskySolver *c, WalsCudaError *err)
{
	const char *what = "allocating the Cholesky systems";
	long long	rows = c->rows;
	int			f = c->f;

	CUDA_TRY(cudaMalloc(&c->A, sizeof(float) * (size_t) rows * f * f), what);
	CUDA_TRY(cudaMalloc(&c->b, sizeof(float) * (size_t) rows * f), what);
	CUDA_TRY(cudaMalloc(&c->Aptr, sizeof(float *) * (size_t) rows), what);
	CUDA_TRY(cudaMalloc(&c->bptr, sizeof(float *) * (size_t) rows), what);
	CUDA_TRY(cudaMalloc(&c->info, sizeof(int) * 2 * (size_t) rows), what);
	CUDA_TRY(cudaMalloc(&c->bad, sizeof(*c->bad)), what);
	chol_pointers<<<(unsigned int) ((rows + 255) / 256), 256>>>(c->A, c->b, f, rows,
																 c->Aptr, c->bptr);
	CUDA_TRY(cudaGetLastError(), what);
	return 0;
}

/*
 * The solver for problem p, batches of the given number of rows (at least
 * 1); 0, or the code of err, which it fills, with nothing left allocated.
 */
int
wals_cuda_cholesky_begin(const WalsCudaProblem *p, long long rows, CholeskySolver **out,
						 WalsCudaError *err)
{
	CholeskySolver *c = new (std::nothrow) CholeskySolver();
	int			rc;

	*out = NULL;
	if (c == NULL)
		return fail(err, WALS_CUDA_ENOMEM, "starting the Cholesky solver", "out of host memory");
	c->params.implicit = p->feedback == 0;
	c->params.alpha = p->alpha;
	c->params.w0 = p->w0;
	c->params.lambda = p->regularization;
	c->f = p->factors;
	c->rows = rows;
	rc = cusolverDnCreate(&c->handle) == CUSOLVER_STATUS_SUCCESS ? 0 :
		fail(err, WALS_CUDA_EDEVICE, "starting cuSOLVER", "cusolverDnCreate failed");
	if (rc == 0)
		rc = allocate(c, err);
	if (rc != 0)
	{
		wals_cuda_cholesky_end(c);
		return rc;
	}
	*out = c;
	return 0;
}

/*
 * Solve every row of the CSR (indptr, indices, values) of nrows rows into
 * X, given the other side Y and its Gram G.  Every step of every batch is
 * queued on the default stream, behind the Gram that cuBLAS computes
 * there, and the host waits once, for the failing row.
 */
int
wals_cuda_cholesky_solve(CholeskySolver *c, long long nrows, const long long *indptr,
						 const int *indices, const float *values, const float *Y,
						 const float *G, float *X, int side, const char *what,
						 WalsCudaError *err)
{
	unsigned long long bad = 0;
	int			f = c->f;

	CUDA_TRY(cudaMemset(c->bad, 0xff, sizeof(*c->bad)), what);
	for (long long lo = 0; lo < nrows; lo += c->rows)
	{
		int			m = (int) (nrows - lo < c->rows ? nrows - lo : c->rows);

		chol_build<<<(unsigned int) m, CHOL_THREADS>>>(c->params, indptr, indices, values,
													   Y, G, lo, f, c->A, c->b);
		CUDA_TRY(cudaGetLastError(), what);
		/* a stale failure of an earlier batch must never read as this one's */
		CUDA_TRY(cudaMemsetAsync(c->info, 0, sizeof(int) * (size_t) m), what);
		SOLVER_TRY(cusolverDnSpotrfBatched(c->handle, CUBLAS_FILL_MODE_LOWER, f, c->Aptr, f,
										   c->info, m), what);
		SOLVER_TRY(cusolverDnSpotrsBatched(c->handle, CUBLAS_FILL_MODE_LOWER, f, 1, c->Aptr, f,
										   c->bptr, f, c->info + c->rows, m), what);
		chol_store<<<(unsigned int) m, CHOL_STORE_THREADS>>>(c->b, c->info, lo, f, X, c->bad);
		CUDA_TRY(cudaGetLastError(), what);
	}
	CUDA_TRY(cudaMemcpy(&bad, c->bad, sizeof(bad), cudaMemcpyDeviceToHost), what);
	if (bad != ~0ULL)
		return fail_row(err, bad % 2 == 0 ? WALS_CUDA_ESINGULAR : WALS_CUDA_ENONFINITE, side,
						(long long) (bad / 2), what);
	return 0;
}
