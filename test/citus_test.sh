#!/bin/sh
# Runs test/t/013_citus.pl (a Citus coordinator and two workers training a
# distributed table) on Debian's PostgreSQL 15 with Citus built from a
# source tree you provide: Debian ships no Citus package, and the machines
# that run .ci/run reach nothing beyond Debian's archive, so .ci/run runs
# it only where such a build is already in the servers' cache.
#
#   make test-citus CITUS_SRC=/path/to/citus     (as root)
#   make test-citus                              (.ci/run)
#
# CITUS_SRC: a checkout or unpacked release of citusdata/citus that
# supports the server (13.2.2 for PostgreSQL 15, 16 and 17).  It is built
# once into ${WALS_PG_CACHE:-/var/cache/wals}/citus-VERSION-pgMAJOR and
# installed into the server's library directory from there; a finished
# build is reused.  Without CITUS_SRC, the latest finished build of the
# cache is installed and the test run, as .ci/run does on a machine that
# has built one; where there is none, it says so and the test is not run.
#
# Citus 13.2.2 defines a static have_createdb_privilege() for PostgreSQL
# before 16, which 15.13 and later declare extern: the copy built here has
# that definition taken out, the server's own being the same function.
set -eu

say() { echo "citus_test.sh: $*" >&2; }

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
major=$($PG_CONFIG --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
cache=${WALS_PG_CACHE:-/var/cache/wals}
if [ -z "${CITUS_SRC:-}" ]; then
	build=$(printf '%s\n' "$cache"/citus-*-pg"$major"/.wals-built | sort -V | tail -n 1)
	if [ ! -f "$build" ]; then
		say "no Citus build for PostgreSQL $major in $cache and no CITUS_SRC: t/013_citus.pl is not run (Debian ships no Citus; see the head of this script)"
		exit 0
	fi
	build=$(dirname "$build")
	say "Citus from $build"
else
	version=$(sed -n 's/^AC_INIT(\[Citus\], \[\([^]]*\)\]).*/\1/p' "$CITUS_SRC/configure.ac")
	[ -n "$version" ] || { say "$CITUS_SRC/configure.ac names no Citus version"; exit 1; }
	build=$cache/citus-$version-pg$major
fi

# Citus's build writes absolute paths of its tree: it is built where it
# stays, and a stamp says it is complete.
if [ ! -f "$build/.wals-built" ]; then
	say "building Citus $version for PostgreSQL $major in $build (about 10 minutes on 2 cores)"
	apt-get install -y --no-install-recommends libcurl4-openssl-dev liblz4-dev libzstd-dev \
		libkrb5-dev libselinux1-dev libxslt1-dev libpam0g-dev >&2
	rm -rf "$build"
	mkdir -p "$build"
	cp -a "$CITUS_SRC/." "$build/"
	python3 - "$build/src/include/pg_version_compat.h" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
text = re.sub(r"\nstatic inline bool\nhave_createdb_privilege\(void\)\n\{.*?\n\}\n", "\n",
              text, count=1, flags=re.S)
open(path, "w").write(text)
PY
	# its decoders' recipes race under -j: what a parallel make leaves, a
	# serial one finishes
	(cd "$build" && ./configure PG_CONFIG="$PG_CONFIG" --without-libcurl >&2 &&
		{ make -j"$(nproc)" >&2 || make >&2; })
	touch "$build/.wals-built"
fi
make -C "$build" install PG_CONFIG="$PG_CONFIG" >&2
./test/installcheck.sh REGRESS= PROVE_TESTS=test/t/013_citus.pl
