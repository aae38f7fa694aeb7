#!/bin/sh
# Makes .lent/ in the repository's root: what a lent GPU machine needs to
# run test/gpu/lent/run.sh there.  Such a machine has a GPU, nvcc and
# Python with numpy, but no PostgreSQL, no package archive and another
# distribution, so everything the server side needs travels with the tree:
#
#   - a PostgreSQL 15 built from Debian's source with no optional library
#     (no ICU, readline, zlib or LLVM), so that it needs nothing but the C
#     library: test/pg_build.sh 15 portable builds it once into
#     $WALS_PG_CACHE (/var/cache/wals) and reuses it;
#   - wals and its CUDA engine built against it and installed into a copy;
#   - test/gpu/check_train, and the serial OpenBLAS with its Fortran
#     runtime, packed (the copy must stay under the 64 MiB that travel);
#   - gen_ratings.py ($WALS_TOOLS, default ../shared/tools).
#
# Run as root from the repository's root (`make deps` first), then on the
# device: `bash test/gpu/lent/run.sh`, carrying `.lent`.
set -eu
root=$(pwd)
tools=${WALS_TOOLS:-$root/../shared/tools}
say() { echo "prepare.sh: $*" >&2; }

pg=$("$root/test/pg_build.sh" 15 portable)

rm -rf .lent
mkdir -p .lent/bin .lent/tools
cp -a "$pg" .lent/pg

# wals built in a copy of the tree, so that the checkout's own objects
# (built against Debian's server) stay as they are
build=$(mktemp -d)
git ls-files | tar -cf - -T - | tar -C "$build" -xf -
(cd "$build" && make -s -j"$(nproc)" PG_CONFIG="$root/.lent/pg/bin/pg_config" >/dev/null &&
	make -s install PG_CONFIG="$root/.lent/pg/bin/pg_config" >/dev/null &&
	make -s test/gpu/check_train >/dev/null)
[ -f .lent/pg/lib/postgresql/wals_cuda.so ] || { say "nvcc did not build the CUDA engine"; exit 1; }
cp "$build/test/gpu/check_train" .lent/bin/
rm -rf "$build"

rm -rf .lent/pg/include .lent/pg/share/doc .lent/pg/lib/*.a
strip .lent/bin/check_train .lent/pg/bin/* 2>/dev/null || true
blas=$(dirname "$(readlink -f /usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0)")
mkdir .lent/lib
cp -L "$blas/libopenblas.so.0" /lib/x86_64-linux-gnu/libgfortran.so.5 \
	/lib/x86_64-linux-gnu/libquadmath.so.0 .lent/lib/
tar -C .lent -cJf .lent/libs.tar.xz lib
rm -rf .lent/lib
cp "$tools/gen_ratings.py" .lent/tools/
say "made .lent ($(du -sh .lent | cut -f1)); on the device: bash test/gpu/lent/run.sh, carrying .lent"
