#!/bin/sh
# The pg_regress suite against a throwaway cluster (pg_virtualenv runs the
# server as the postgres user and removes the cluster afterwards).  The
# extension must already be installed.
set -e
cd "$(dirname "$0")/.."
PG_CONFIG=${PG_CONFIG:-pg_config}
version=$("$PG_CONFIG" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
status=0
pg_virtualenv -t -v "$version" make -s installcheck PG_CONFIG="$PG_CONFIG" || status=$?
if [ "$status" -ne 0 ] && [ -f regression.diffs ]; then
	cat regression.diffs
fi
exit "$status"
