#!/bin/sh
# pg_regress and every TAP test on a PostgreSQL of a private prefix, which
# test/pg_build.sh MAJOR FLAVOUR builds the first time: wals is built
# against that server with -Werror in a copy of the tree, so that the
# checkout's own objects (built against Debian's server) stay as they are,
# installed into the prefix with the extensions the TAP tests use, and
# test/installcheck.sh runs both suites there.
#
#   ./test/pg_test.sh 15 cassert          what `make test-cassert` runs
#   ./test/pg_test.sh 15 cassert REGRESS= PROVE_TESTS=test/t/012_shards.pl
#                                         make variables, for fewer
#
# The extensions: postgres_fdw (t/012_shards.pl) is contrib's, built with
# the server.  pg_cron (t/009_cron.pl) is Debian's postgresql-MAJOR-cron,
# copied in rather than built from its source package: its library was
# built against the same major's headers, whose structs are the same with
# assertions on, so the private server loads it as Debian's does, and the
# test is after wals under pg_cron, not after pg_cron's own assertions.
# Where that package is not installed, t/009 skips, saying why; pgvector
# and Citus, which make deps does not install, skip t/007 and t/013 as
# under `make test`.
#
# On a major above 15, t/021_pg_upgrade.pl upgrades clusters of PostgreSQL
# 15, the oldest major wals supports, to the prefix's server: 15 as
# `make test-cassert` runs it (test/pg_build.sh 15 cassert, built from the
# same upstream sources as the later majors; Debian's own 15 writes a
# column option, pg_attver, that no upstream server knows, and cannot be
# upgraded to one), with wals built against it in a copy of its own and
# installed there, and WALS_UPGRADE_FROM names that installation.  Run as
# root, like `make test`.
set -eu
say() { echo "pg_test.sh: $*" >&2; }

if [ $# -lt 2 ]; then
	say "usage: $0 MAJOR FLAVOUR [make variables]"
	exit 2
fi
major=$1
flavour=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
# A prefix the answer must be: one absolute path to a server's folder,
# never a line some installer printed before it.
server_prefix() {
	case $1 in
	/*) [ -x "$1/bin/pg_config" ] && return 0 ;;
	esac
	say "test/pg_build.sh $2 answered \"$1\", not the prefix of a server"
	exit 1
}
prefix=$("$root/test/pg_build.sh" "$major" "$flavour")
server_prefix "$prefix" "$major $flavour"
pg_config=$prefix/bin/pg_config

# A copy of the tree in the new folder $1: everything but what the server's
# headers went into; the GPU test libraries and the objects they link
# (build/host), built without them, come along when the checkout has them.
copy_tree() {
	tar -C "$root" --exclude=./.git --exclude=./.lent --exclude=./build/arm64 \
		--exclude=./build/deb --exclude=./test/bench/cache --exclude='./src/*.o' \
		--exclude='./src/*.bc' --exclude='./src/*.so' --exclude=./wals.so -cf - . |
		tar -C "$1" -xf -
}

build=$(mktemp -d "${TMPDIR:-/tmp}/wals_pg$major-$flavour.XXXXXX")
old_build=""
trap 'rm -rf "$build" ${old_build:+"$old_build"}' EXIT

# The digest of what goes into an installation of wals: its sources, SQL
# scripts, control file and Makefile.
digest=$( (cd "$root" && find Makefile wals.control sql src gpu -type f \
	! -name '*.o' ! -name '*.bc' ! -name '*.so' | LC_ALL=C sort | xargs sha256sum) |
	sha256sum | cut -d' ' -f1)

# wals built in the copy of the tree $1 against the server of the
# pg_config $2 and installed there, unless these same sources already are
# (a file beside wals.so holds their digest, written once the installation
# is whole): make test-cassert installs into the 15 that make test-pg17
# and test-pg18 upgrade from.
install_wals() {
	stamp=$("$2" --pkglibdir)/wals.source-digest
	if [ "$(cat "$stamp" 2>/dev/null)" = "$digest" ]; then
		say "wals of these sources is installed for $("$2" --version) in $("$2" --pkglibdir)"
		return
	fi
	say "building wals against $("$2" --version) of $(dirname "$(dirname "$2")")"
	rm -f "$stamp"
	make -s -C "$1" -j"$(nproc)" all WERROR=-Werror PG_CONFIG="$2"
	make -s -C "$1" install PG_CONFIG="$2"
	echo "$digest" >"$stamp"
}

if [ "$major" -gt 15 ]; then
	old_install=$("$root/test/pg_build.sh" 15 cassert)
	server_prefix "$old_install" "15 cassert"
	old_build=$(mktemp -d "${TMPDIR:-/tmp}/wals_pg15-upgrade.XXXXXX")
	copy_tree "$old_build"
	install_wals "$old_build" "$old_install/bin/pg_config"
	export WALS_UPGRADE_FROM="$old_install"
fi

copy_tree "$build"
cd "$build"
install_wals "$build" "$pg_config"
make -s test/gpu/host_engine.so test/gpu/wals_cuda_emu.so WERROR=-Werror PG_CONFIG="$pg_config"

debian_pg_config=/usr/lib/postgresql/$major/bin/pg_config
if [ -x "$debian_pg_config" ] && [ -f "$("$debian_pg_config" --pkglibdir)/pg_cron.so" ]; then
	cp "$("$debian_pg_config" --pkglibdir)/pg_cron.so" "$("$pg_config" --pkglibdir)/"
	cp "$("$debian_pg_config" --sharedir)"/extension/pg_cron[.-]* "$("$pg_config" --sharedir)/extension/"
fi

PG_CONFIG=$pg_config ./test/installcheck.sh "$@"
