# shellcheck shell=sh
# lib.sh: what the test and benchmark scripts share, sourced from the
# repository's root (POSIX sh): the server they run against and how to run
# a throwaway cluster of it.
#
# PG_CONFIG (default pg_config, exported) names the server; PG_MAJOR is its
# major version.  postgresql-common's pg_virtualenv runs only Debian's own
# servers; for any other prefix (a private build of test/pg_build.sh)
# test/bin/pg_virtualenv stands in.  PG_DEBIAN is yes for one of Debian's.
PG_CONFIG=${PG_CONFIG:-pg_config}
export PG_CONFIG
PG_MAJOR=$("$PG_CONFIG" --version 2>/dev/null | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
if [ "$("$PG_CONFIG" --bindir 2>/dev/null)" = "/usr/lib/postgresql/$PG_MAJOR/bin" ]; then
	PG_DEBIAN=yes
	PG_VIRTUALENV="pg_virtualenv -v $PG_MAJOR"
else
	PG_DEBIAN=no
	PG_VIRTUALENV="$(pwd)/test/bin/pg_virtualenv"
fi

# wals_copy_tree DIR: the tree (the current directory) copied into DIR,
# build outputs of make included (the suites use some), without .git, the
# benchmarks' data and the packages' builds.
wals_copy_tree() {
	tar --exclude=./.git --exclude=./test/bench/cache --exclude=./build -cf - . |
		tar -C "$1" -xf -
}
