#!/bin/sh
# The demo against a throwaway cluster: pg_virtualenv starts a server as the
# postgres user, the demo script trains and prints, and the cluster is
# removed.  The extension must already be installed.
set -e
cd "$(dirname "$0")/.."
PG_CONFIG=${PG_CONFIG:-pg_config}
version=$("$PG_CONFIG" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
# postgresql-common's pg_virtualenv runs Debian's own servers; for another
# prefix's, test/bin/pg_virtualenv stands in (as for test/installcheck.sh).
if [ "$("$PG_CONFIG" --bindir)" = "/usr/lib/postgresql/$version/bin" ]; then
	pg_virtualenv -t -v "$version" psql -X -q -f test/demo.sql
else
	export PG_CONFIG
	./test/bin/pg_virtualenv psql -X -q -f "$(pwd)/test/demo.sql"
fi
