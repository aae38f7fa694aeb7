/*
 * wals_cuda.h
 *	  The C interface of wals_cuda.so, the CUDA engine of wals.
 *
 * wals.so never links CUDA: it opens this library when a GPU is first
 * considered and calls its one exported symbol, wals_cuda_init, which fills
 * a table of functions.  Every function reports failure through its return
 * value and a message (the training's through a WalsCudaError, which says
 * what kind of failure it was, so that the server reports it with the
 * same SQLSTATE as the CPU's); no C++ exception ever crosses this header.
 */
#ifndef WALS_CUDA_H
#define WALS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* Bumped whenever the table below changes, so a stale library is refused. */
#define WALS_CUDA_ABI_VERSION	7

/* What the CUDA runtime says of one device. */
typedef struct WalsCudaDevice
{
	char		name[256];
	size_t		memory_total;	/* bytes */
	size_t		memory_free;	/* bytes, when asked */
	int			cc_major;		/* compute capability */
	int			cc_minor;
	int			driver_version; /* as CUDA encodes it: 1000 major + 10 minor */
	int			runtime_version;
} WalsCudaDevice;

/* The solvers, numbered as src/core's WalsSolver. */
#define WALS_CUDA_CHOLESKY	0
#define WALS_CUDA_CG		1
#define WALS_CUDA_SUBSPACE	2

/* The most factors a training may have. */
#define WALS_CUDA_MAX_FACTORS	4096

/* The spare vectors a training may keep, and the terms of a line's quartic. */
#define WALS_CUDA_MAX_VECTORS	4
#define WALS_CUDA_LINE_TERMS	5

/*
 * A training as src/core describes one: feedback 0 implicit, 1 explicit;
 * both matrices as CSR (by user, by item) and the starting factors, all in
 * host memory that the caller keeps until train_begin returns.  Where
 * may_map_cells is set, the cells of both matrices (indices and values)
 * must stay, unchanged, until train_end: when they do not fit in the
 * device's memory beside the rest of the training, train_begin pins them
 * where they are and the device reads them from there, over the bus,
 * each half-sweep (out of core); where it is not set (cells in files
 * that the page cache streams), they must fit on the device.  The
 * subspace solver takes blocks of block_size dimensions (all f at once
 * when block_size >= f, which is the Cholesky solve).  vectors is the
 * number of spare vectors of the size of all factors that the training
 * keeps on the device for the operations below (0 to
 * WALS_CUDA_MAX_VECTORS; 0 refuses them).  With frequency_scaled, a row
 * of n ratings is regularised by lambda (n + w0 N)^reg_exponent, N the
 * other side's rows, and otherwise by lambda (implicit) or lambda n
 * (explicit), as src/core's wals_row_scale.  The training runs on device
 * (0 to device_count - 1), which train_begin selects.
 */
typedef struct WalsCudaProblem
{
	int			device;
	int			feedback;
	int			solver;
	int			factors;
	int			cg_steps;
	int			block_size;		/* dimensions per block of the subspace solver */
	int			vectors;		/* spare factor-sized vectors to keep */
	float		regularization;
	float		alpha;
	float		w0;
	int			frequency_scaled;
	float		reg_exponent;
	int64_t		nusers;
	int64_t		nitems;
	const int64_t *user_indptr;
	const int32_t *user_indices;
	const float *user_values;
	const int64_t *item_indptr;
	const int32_t *item_indices;
	const float *item_values;
	const float *X;				/* nusers x factors */
	const float *Y;				/* nitems x factors */
	int			may_map_cells;	/* the cells may be read from host memory */
} WalsCudaProblem;

/* Kinds of failure of a training call, and whose row failed. */
#define WALS_CUDA_EDEVICE		1	/* a call of CUDA, cuBLAS or cuSOLVER failed */
#define WALS_CUDA_ENOMEM		2	/* out of device or host memory */
#define WALS_CUDA_ESINGULAR		3	/* a row's system is not positive definite */
#define WALS_CUDA_ENONFINITE	4	/* a row's solution is not finite */
#define WALS_CUDA_EINVAL		5	/* a problem this engine cannot train */
#define WALS_CUDA_USERS			0
#define WALS_CUDA_ITEMS			1

typedef struct WalsCudaError
{
	int			code;			/* one of WALS_CUDA_E* */
	int			side;			/* WALS_CUDA_USERS or _ITEMS, or -1 */
	int64_t		row;			/* the lowest failing row of that side, or -1 */
	char		msg[512];		/* what failed, in the engine's words */
} WalsCudaError;

typedef struct WalsCudaApi
{
	int			abi_version;

	/*
	 * Number of usable devices: 0 where there is no GPU (no device, or no
	 * driver installed), msg saying which; -1 when CUDA is there but cannot
	 * be used (a driver older than the library's runtime, a broken
	 * installation), msg saying why.
	 */
	int			(*device_count) (char *msg, size_t msglen);

	/*
	 * Describe device index; 0 on success, -1 with msg set.  The current
	 * device stays as it was, and no context is left on any other.
	 */
	int			(*device_info) (int index, WalsCudaDevice *out,
								char *msg, size_t msglen);

	/*
	 * Upload a problem to the current device (*state receives the
	 * training), run one iteration (Y^T Y, the user half-sweep, X^T X, the
	 * item half-sweep and the exact loss), and end it, downloading the
	 * factors when X and Y are not NULL and freeing the device memory in
	 * every case.  Each returns 0, or the code of err, which it fills;
	 * after a failure of train_iterate the caller still calls train_end.
	 * Every solver runs on the device; a row whose system (or a block of
	 * it, subspace) is not positive definite or whose solution is not
	 * finite fails
	 * train_iterate with err naming the side and the lowest such row.
	 */
	int			(*train_begin) (const WalsCudaProblem *problem, void **state,
								WalsCudaError *err);
	int			(*train_iterate) (void *state, double *loss, WalsCudaError *err);
	int			(*train_end) (void *state, float *X, float *Y, WalsCudaError *err);

	/*
	 * Copy the current factors into X and Y (host, nusers and nitems rows)
	 * and go on training: what a validation scores between iterations.
	 */
	int			(*train_download) (void *state, float *X, float *Y, WalsCudaError *err);

	/*
	 * 1 when the training reads the cells of its matrices from host memory
	 * (they did not fit on the device), 0 when it uploaded them.
	 */
	int			(*train_cells_on_host) (void *state);

	/*
	 * Operations on whole factor-sized vectors of a training that keeps
	 * spares (problem->vectors > 0), for ALS-NCG.  Vector 0 is the factors
	 * (X then Y), 1 to vectors the spares, on the device; a spare holds
	 * nothing defined until it is written.  Each returns 0, or the code of
	 * err (WALS_CUDA_EINVAL when the training keeps no spares and for a
	 * vector number out of range).
	 *
	 * train_combine: dst = a x + b y elementwise (dst may be x or y), not
	 *	 reading an operand whose coefficient is 0 (it may hold anything);
	 *	 when dst is the factors, the next train_iterate sweeps from them
	 *	 (it forms the Grams it reads from the factors it starts from).
	 * train_dot: *out = x.y over all factors, accumulated in double.
	 * train_line: coef[k] of the quartic L(base + t dir) = sum_k coef[k] t^k,
	 *	 exactly as src/core's wals_line_rows, wals_line_reg_rows and
	 *	 wals_line_unobserved give it, accumulated in double.
	 */
	int			(*train_combine) (void *state, int dst, double a, int x, double b, int y,
								  WalsCudaError *err);
	int			(*train_dot) (void *state, int x, int y, double *out, WalsCudaError *err);
	int			(*train_line) (void *state, int base, int dir,
							   double coef[WALS_CUDA_LINE_TERMS], WalsCudaError *err);
} WalsCudaApi;

/* Fill api; returns 0, or -1 when api is NULL. */
typedef int (*WalsCudaInit) (WalsCudaApi *api);
int			wals_cuda_init(WalsCudaApi *api);

#ifdef __cplusplus
}
#endif

#endif							/* WALS_CUDA_H */
