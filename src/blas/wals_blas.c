/*
 * wals_blas.c
 *	  The module that brings BLAS and LAPACK into a backend for wals.
 *
 * It holds nothing but PostgreSQL's magic block: it is linked to OpenBLAS,
 * so loading it (load_file, as wals_load_blas does where the core first
 * needs BLAS) loads OpenBLAS for every library of the backend, where
 * src/core/blas.c finds the functions by name.  wals.so itself is not
 * linked to OpenBLAS, so that a backend that only serves never pays for
 * resolving its symbols.
 */
#include "postgres.h"

#include "fmgr.h"

PG_MODULE_MAGIC;
