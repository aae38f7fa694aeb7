/*
 * poll.c
 *	  The caller's hook that the core's long loops call between pieces of
 *	  bounded work, so that a server can answer a cancel in the middle of
 *	  a Cholesky row of f = 4096 or the Gram of a wide model.
 *
 * The core cannot check for interrupts itself: it knows no server.  So it
 * counts its work instead, in units of about one multiply-add (a pass over
 * memory counts each element it reads as a few), and every WALS_POLL_WORK
 * units calls the hook the caller installed, if any.  Counting work rather
 * than rows or cells keeps the pause between two polls at a few
 * milliseconds whatever f is, and costs a subtraction and a test per step
 * of a loop, which no benchmark can see at f = 64.  A call into BLAS cannot
 * poll, so the core cuts its products into pieces of at most
 * WALS_BLAS_PIECE units (wals_syrk_pieces and the callers of cblas_sgemm)
 * and polls between them.
 *
 * The counter is one per process: the server's backends and parallel
 * workers are processes, and the programs that link the core without a
 * server (the tests, the benchmarks, the GPU checks) install no hook.
 */
#include "wals_internal.h"

static WalsPollHook poll_hook;

int64_t		wals_poll_budget = WALS_POLL_WORK;

void
wals_set_poll_hook(WalsPollHook hook)
{
	poll_hook = hook;
	wals_poll_budget = WALS_POLL_WORK;
}

/*
 * The budget is renewed before the hook runs: the server's hook does not
 * return when it raises a cancel, and the next call of the core must then
 * start with a whole budget, not a debt.
 */
void
wals_poll_due(void)
{
	wals_poll_budget = WALS_POLL_WORK;
	if (poll_hook != NULL)
		poll_hook();
}

void
wals_zero_floats(float *p, size_t n)
{
	wals_fill_floats(p, NULL, n);
}

void
wals_copy_floats(float *dst, const float *src, size_t n)
{
	wals_fill_floats(dst, src, n);
}

void
wals_copy_bytes(void *dst, const void *src, size_t bytes)
{
	wals_fill_bytes(dst, src, bytes);
}
