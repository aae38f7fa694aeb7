#!/bin/bash
# A big catalog through the server: exact wals_recommend over millions of
# items, against the targets of one copy for every connection (1M x 128 at
# most 0.5 ms a call, 10M x 64 at most 5 ms, warm; a new backend's first
# call at most 5 ms at 1M x 128).
#
#   ./test/bench/catalog.sh        (from the repository root, as root, with
#                                   the extension built and installed; or
#                                   `make bench-catalog`, which does both)
#
# 1. in a throw-away cluster makes the ratings in SQL: CATALOG_ITEMS items
#    (default 10,000,000), each rated by two of CATALOG_USERS users
#    (default 100,000), and a thousandth of the items rated far more (50
#    ratings of each user among them), so that the trained item norms
#    spread as popularity spreads them;
# 2. trains CATALOG_FACTORS factors (default 64), 3 CG iterations;
# 3. times wals_recommend(user, 10) of 200 users in the server, after a
#    warm-up pass, and the first call of 20 new connections;
# 4. checks the top 10 of CATALOG_CHECK users (default 1) against a plain
#    SQL scan of every item's factors (about a minute a user at 10M);
# 5. prints the CPU, the kernels, the sizes and the figures, also written
#    to test/bench/out/catalog.txt.
#
# Nothing is asserted.  About 15 minutes on 2 cores at 10M x 64; memory:
# the training needs about 3 GB, the shared items about 3 GB of /dev/shm.
set -euo pipefail

cd "$(dirname "$0")/../.."

say() { echo "catalog.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare

say "serving a big catalog in a throw-away PostgreSQL cluster"
if ! $PG_VIRTUALENV -t -o shared_buffers=2GB -o max_wal_size=20GB -o maintenance_work_mem=1GB \
	-o "huge_pages=${CATALOG_HUGE_PAGES:-try}" \
	bash "$BENCH/catalog_db.sh" | tee "$OUTDIR/catalog.txt"; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi
