/*
 * pg_abi.c
 *	  Compiled, never linked, by the aarch64 cross build of wals.so (make
 *	  test-arm64): the build fails here if the server headers it reads
 *	  describe a machine other than the one the compiler targets.
 *
 * Debian's postgresql-server-dev-15 cannot be installed for arm64 beside
 * the amd64 one that make test needs (it is not Multi-Arch: same), so the
 * cross build reads the x86-64 headers.  Their pg_config.h describes a
 * 64-bit little-endian Linux, as aarch64 is: every SIZEOF_ and ALIGNOF_
 * macro, MAXIMUM_ALIGNOF, PG_INT128_TYPE, FLOAT8PASSBYVAL and the byte
 * order are the same as in the arm64 package's pg_config.h (compared for
 * 15.20-0+deb12u1).  The arm64 file differs only in CPU features that
 * select code inside the server: HAVE_X86_64_POPCNTQ and HAVE__GET_CPUID
 * (undefined on arm64, which changes pg_popcount32/64 from function
 * pointers into functions) and the CRC-32C choice
 * (USE_ARMV8_CRC32C_WITH_RUNTIME_CHECK instead of the SSE 4.2 one; both
 * call through the pointer pg_comp_crc32c).  wals uses neither
 * pg_popcount nor CRC-32C, and wals.so built against the arm64 package's
 * headers had the same .text, .rodata and .data, byte for byte; should wals
 * ever call those, its arm64 build must read the arm64 headers.  The
 * layout facts are checked here against the compiler.
 */
#include "postgres.h"

StaticAssertDecl(SIZEOF_BOOL == sizeof(bool), "SIZEOF_BOOL");
StaticAssertDecl(SIZEOF_LONG == sizeof(long), "SIZEOF_LONG");
StaticAssertDecl(SIZEOF_OFF_T == sizeof(off_t), "SIZEOF_OFF_T");
StaticAssertDecl(SIZEOF_SIZE_T == sizeof(size_t), "SIZEOF_SIZE_T");
StaticAssertDecl(SIZEOF_VOID_P == sizeof(void *), "SIZEOF_VOID_P");
StaticAssertDecl(SIZEOF_DATUM == sizeof(Datum), "SIZEOF_DATUM");
StaticAssertDecl(ALIGNOF_SHORT == _Alignof(short), "ALIGNOF_SHORT");
StaticAssertDecl(ALIGNOF_INT == _Alignof(int), "ALIGNOF_INT");
StaticAssertDecl(ALIGNOF_LONG == _Alignof(long), "ALIGNOF_LONG");
StaticAssertDecl(ALIGNOF_DOUBLE == _Alignof(double), "ALIGNOF_DOUBLE");
StaticAssertDecl(ALIGNOF_PG_INT128_TYPE == _Alignof(PG_INT128_TYPE),
				 "ALIGNOF_PG_INT128_TYPE");
StaticAssertDecl(MAXIMUM_ALIGNOF == _Alignof(double), "MAXIMUM_ALIGNOF");
StaticAssertDecl(sizeof(int64) == 8 && sizeof(int32) == 4, "int64, int32");
#ifdef USE_FLOAT8_BYVAL
StaticAssertDecl(SIZEOF_DATUM == 8, "FLOAT8PASSBYVAL needs 8-byte Datum");
#endif
#ifdef WORDS_BIGENDIAN
StaticAssertDecl(__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__, "byte order");
#else
StaticAssertDecl(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "byte order");
#endif

/* A translation unit must declare something. */
extern int	wals_pg_abi_checked;
int			wals_pg_abi_checked = 1;
