/*
 * blas.c
 *	  BLAS and LAPACK, bound where they are first needed.
 *
 * OpenBLAS exports some fifteen thousand symbols, and a library linked to
 * it has the dynamic linker resolve every one of them as it is loaded: 7 to
 * 10 ms of a new backend's first call to wals on a 2-core Xeon, although
 * serving a user never calls BLAS.  So the server's library is not linked
 * to it.  The core reaches BLAS through the table wals_blas returns, which
 * it fills on the first call that needs it, by name among the libraries
 * loaded (dlsym), after the loader its caller installed has loaded them:
 * the server's loads its module wals_blas, which is linked to OpenBLAS,
 * and raises an error where the functions are still missing.  The
 * programs that link the core and OpenBLAS themselves (the unit tests, the
 * benchmarks, the GPU checks) are built with WALS_BLAS_LINKED, and the
 * table holds the functions they link.
 */
#include <cblas.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef WALS_BLAS_LINKED
#include <dlfcn.h>
#endif

#include "wals_internal.h"

#ifdef WALS_BLAS_LINKED

static const WalsBlas linked = {cblas_sgemm, cblas_ssyrk, cblas_strsm, spotrf_, spotrs_};

const WalsBlas *
wals_blas(void)
{
	return &linked;
}

#else

static WalsBlas bound;
static bool is_bound;
static WalsBlasLoader loader;

void
wals_set_blas_loader(WalsBlasLoader fn)
{
	loader = fn;
}

/* Whether every function the core calls is among the libraries loaded. */
bool
wals_blas_bind(void)
{
	WalsBlas	b;

	if (is_bound)
		return true;
	*(void **) &b.sgemm = dlsym(RTLD_DEFAULT, "cblas_sgemm");
	*(void **) &b.ssyrk = dlsym(RTLD_DEFAULT, "cblas_ssyrk");
	*(void **) &b.strsm = dlsym(RTLD_DEFAULT, "cblas_strsm");
	*(void **) &b.spotrf = dlsym(RTLD_DEFAULT, "spotrf_");
	*(void **) &b.spotrs = dlsym(RTLD_DEFAULT, "spotrs_");
	if (b.sgemm == NULL || b.ssyrk == NULL || b.strsm == NULL || b.spotrf == NULL ||
		b.spotrs == NULL)
		return false;
	bound = b;
	is_bound = true;
	return true;
}

const WalsBlas *
wals_blas(void)
{
	if (!is_bound)
	{
		if (loader != NULL)
			loader();
		if (!wals_blas_bind())
		{
			fprintf(stderr, "wals: BLAS and LAPACK are not loaded\n");
			abort();
		}
	}
	return &bound;
}

#endif
