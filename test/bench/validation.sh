#!/bin/bash
# Validation benchmark: what early stopping costs an iteration.  The
# seconds of a training's iterations with a validation share against the
# same training without one, at the shape of the public implicit benchmark
# the issues cite (about 30,000 users, 41,000 items, 820,000 training
# interactions), f = 128, with 2 parallel workers and with none.
#
#   ./test/bench/validation.sh     (from the repository root, as root, with
#                                   the extension built and installed; or
#                                   `make bench-validation`, which does both)
#
# 1. generates the set once into test/bench/cache/ (that of evaluate.sh:
#    gen_ratings.py --users 29858 --items 40981 --nnz 1030000
#    --test-fraction 0.2, whose training part is trained here), or takes
#    RATINGS, a headerless user_id,item_id[,rating] CSV of your own;
# 2. in a throw-away cluster trains VALIDATION_ITERATIONS (default 12)
#    iterations for each number of workers (VALIDATION_WORKERS, default
#    "2 0"), once without a validation and once with validation => 0.1
#    (patience high enough that it never stops early);
# 3. prints the CPU, the kernels, and for each training the median seconds
#    of an iteration (from wals_training_log), the iterations scored, and
#    the ratio of an iteration with validation to one without.
#
# Nothing is asserted.  Environment: WALS_TOOLS, the folder of
# gen_ratings.py (default ../shared/tools).
set -euo pipefail

cd "$(dirname "$0")/../.."

say() { echo "validation.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

if [ -n "${RATINGS:-}" ]; then
	data=$(abspath "$RATINGS")
else
	gen_gowalla
	data=$CACHE/$DATA.csv
fi

say "training in a throw-away PostgreSQL cluster"
if ! $PG_VIRTUALENV -t -o shared_buffers=512MB -o max_worker_processes=16 \
	-o max_parallel_workers=8 -o max_parallel_maintenance_workers=4 \
	bash "$BENCH/validation_db.sh" "$data" | tee "$OUTDIR/validation.txt"; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi
say "written to $OUTDIR/validation.txt"
