#!/bin/bash
# One copy of a model for every connection: what a new backend's first
# call costs, what memory a serving backend adds, and the slowest call of
# four clients while a retraining commits, with the items shared by every
# backend (wals.shared_items on, the default) and with each backend
# building its own copy (off, as every backend did before), at the shape of
# the public implicit benchmark the issues cite (about 30,000 users, 41,000
# items, 820,000 training interactions), f = 256.
#
#   ./test/bench/shared.sh      (from the repository root, as root, with
#                                the extension built and installed; or
#                                `make bench-shared`, which does both)
#
# 1. generates the set once into test/bench/cache/ (that of evaluate.sh),
#    or takes RATINGS, a headerless user_id,item_id[,rating] CSV of your
#    own;
# 2. in a throw-away cluster trains SHARED_FACTORS (default 256) factors,
#    SHARED_ITERATIONS (default 4) iterations;
# 3. for each setting: SHARED_CONNECTIONS (default 40) new connections
#    that each time the load of the library (LOAD 'wals') and then their
#    first wals_recommend;
#    the private memory (RssAnon) and the shared memory mapped (RssShmem)
#    a backend adds by serving; pgbench with 4 clients from before a
#    retraining to 4 s after its commit: the slowest call (after each
#    client's first), and the slowest of those that ended within 2 s
#    after the commit;
# 4. prints the CPU, the kernels, the pages memory is mapped in (a new
#    backend's first touch of each page is what its first call costs on a
#    virtual machine that shadows page tables) and the figures, also
#    written to test/bench/out/shared.txt.
#
# PostgreSQL's shared memory goes in huge pages where the kernel has them
# reserved (vm.nr_hugepages; huge_pages = try, or SHARED_HUGE_PAGES=on to
# insist), and the shared copies of the items where /dev/shm is mounted
# with huge=within_size: the bench says which, and changes neither.
#
# Nothing is asserted.  Environment: WALS_TOOLS, the folder of
# gen_ratings.py (default ../shared/tools).
set -euo pipefail

cd "$(dirname "$0")/../.."

say() { echo "shared.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

if [ -n "${RATINGS:-}" ]; then
	data=$(abspath "$RATINGS")
else
	gen_gowalla
	data=$CACHE/$DATA.csv
fi

say "serving in a throw-away PostgreSQL cluster"
if ! $PG_VIRTUALENV -t -o shared_buffers=512MB -o "huge_pages=${SHARED_HUGE_PAGES:-try}" \
	bash "$BENCH/shared_db.sh" "$data" | tee "$OUTDIR/shared.txt"; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi
say "written to $OUTDIR/shared.txt"
