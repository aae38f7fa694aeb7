#!/bin/sh
# The demo against a throwaway cluster: pg_virtualenv starts a server as the
# postgres user, the demo script trains and prints, and the cluster is
# removed.  The extension must already be installed.
set -e
cd "$(dirname "$0")/.."
. test/lib.sh
if [ "$PG_DEBIAN" = yes ]; then
	$PG_VIRTUALENV -t psql -X -q -f test/demo.sql
else
	$PG_VIRTUALENV psql -X -q -f "$(pwd)/test/demo.sql"
fi
