/*
 * check_train.h
 *	  What check_train.c, the checks of any engine, shares with check_emu.c,
 *	  the checks only an emulated device allows.
 */
#ifndef CHECK_TRAIN_H
#define CHECK_TRAIN_H

#include "wals_core.h"
#include "wals_cuda.h"

typedef struct Shape
{
	const char *name;
	WalsFeedback feedback;
	float		w0;
	int64_t		users;
	int64_t		items;
	size_t		ratings;
	int			factors;
	int			iterations;		/* compared, one by one */
	float		nu;				/* regularization exponent; negative: classic */
	float		lambda;			/* regularization; 0: 0.1 */
	float		dislikes;		/* share of implicit ratings negated */
} Shape;

/* A check: 1 when it passed; it says why when it did not, unless quiet. */
typedef int (*CheckFn) (const void *arg);

extern WalsCudaApi cuda;
extern int	quiet;

extern void say(const char *fmt,...) __attribute__((format(printf, 1, 2)));
extern void run_check(CheckFn fn, const void *arg);
extern void make_data(const Shape *shape, WalsCsr *R, WalsCsr *Rt);
extern void free_csr(WalsCsr *R);
extern void start_factors(float *X, int64_t users, float *Y, int64_t items, int f);
extern WalsParams shape_params(const Shape *shape, WalsSolver solver, int block_size);
extern void make_problem(const WalsParams *params, const WalsCsr *R, const WalsCsr *Rt,
						 const float *X, const float *Y, int vectors,
						 WalsCudaProblem *problem);
extern int	check_shape(const Shape *shape, WalsSolver solver, int block_size);

/* How check_train takes device_count's answer. */
typedef enum
{
	DEVICES_RUN,				/* check the engine */
	DEVICES_SKIP,				/* no GPU on this machine: nothing to check */
	DEVICES_BROKEN				/* CUDA is there but unusable: a failure */
} DevicesVerdict;

extern DevicesVerdict devices_verdict(int devices);

/* check_emu.c: the checks of an emulated device, given its knobs. */
typedef long (*EmuSet) (const char *name, long value);
typedef long (*EmuGet) (const char *name, long arg);
extern void emu_checks(EmuSet set, EmuGet get);

#endif							/* CHECK_TRAIN_H */
