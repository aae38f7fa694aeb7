#!/bin/bash
# Evaluation benchmark: the milliseconds per test user of wals_evaluate at
# the shape of the public implicit benchmark the issues cite (about 30,000
# users, 41,000 items, 1M interactions, a fifth of each user's items held
# out), f = 128, with each number of parallel workers.
#
#   ./test/bench/evaluate.sh       (from the repository root, as root, with
#                                   the extension built and installed; or
#                                   `make bench-evaluate`, which does both)
#
# 1. generates the set once into test/bench/cache/ (gen_ratings.py --users
#    29858 --items 40981 --nnz 1030000 --test-fraction 0.2);
# 2. in a throw-away cluster (pg_virtualenv -t) trains 10 iterations at
#    f = EVAL_FACTORS (default 128) and runs wals_evaluate EVAL_RUNS times
#    (default 3) with max_parallel_maintenance_workers set to each of
#    EVAL_WORKERS (default "0 1 2");
# 3. prints the CPU, the kernels, every run's seconds and milliseconds per
#    test user, and the metrics (the same with any number of workers).
#
# Nothing is asserted.  Environment: WALS_TOOLS, the folder of
# gen_ratings.py (default ../shared/tools); EVAL_KERNELS, the wals.kernels
# of every run (default auto).
set -euo pipefail

cd "$(dirname "$0")/../.."

say() { echo "evaluate.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

gen_gowalla

say "evaluating in a throw-away PostgreSQL 15 cluster"
if ! $PG_VIRTUALENV -t -o shared_buffers=512MB \
	bash "$BENCH/evaluate_db.sh" "$CACHE/$DATA" | tee "$OUTDIR/evaluate.txt"; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi
say "written to $OUTDIR/evaluate.txt"
