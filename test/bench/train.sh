#!/bin/bash
# Training benchmark at MovieLens-20M size, against the targets of
# doc/performance.md.
#
#   ./test/bench/train.sh          (from the repository root, as root, with
#                                   the extension built and installed; or
#                                   `make bench`, which does both first)
#
# 1. generates the data set once into test/bench/cache/ (gen_ratings.py
#    --users 138000 --items 27000 --nnz 20000000 --test-fraction 0.02);
# 2. in a throw-away cluster (pg_virtualenv -t), loads both splits with
#    \copy, VACUUM ANALYZE, and times SELECT sum(rating) inside the server;
# 3. trains f=64, 15 iterations: CG (3 steps) with workers => 0, 1 and 2,
#    Cholesky with workers => 1, sampling the memory of the backend and its
#    parallel workers (mem_sampler.py); scores CG and Cholesky with
#    workers => 1 on the held-out split; trains CG on 1M and 5M samples of
#    the training table (train_db.sh);
# 4. prints the figures beside the targets (train_report.py), also written
#    to test/bench/out/train.txt.
#
# Nothing is asserted.  About 15 minutes on the 2-core machine before the
# parallel and faster solvers, less after.
# Environment: WALS_TOOLS, the folder of gen_ratings.py (default
# ../shared/tools).
set -euo pipefail

cd "$(dirname "$0")/../.."
START=$(date +%s)

say() { echo "train.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

gen_20m

RES=$(mktemp -d -t wals-train.XXXXXX)
trap 'rm -rf "$RES"' EXIT
chmod 755 "$RES"

say "training in a throw-away PostgreSQL 15 cluster"
# -t: a private cluster directory even as root, so that concurrent test runs
# do not collide with us.  Enough worker processes for workers => 2 (and
# for the parallel scan of the sum(rating) baseline); shared_buffers large
# enough that the factor tables' writes are not throttled by evictions.
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
if ! $PG_VIRTUALENV -t \
	-o shared_buffers=1GB \
	-o max_worker_processes=16 \
	-o max_parallel_workers=8 \
	-o max_parallel_maintenance_workers=4 \
	bash "$BENCH/train_db.sh" "$CACHE/$DATA" "$RES" >&2; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi

OUTFILE=$OUTDIR/train.txt
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
if [ -n "$(git -C "$ROOT" status --porcelain -- src sql 2>/dev/null)" ]; then
	commit="$commit (src or sql modified)"
fi
$PY "$BENCH/train_report.py" "$RES" \
	--data "gen_ratings.py $DATA_ARGS --seed $SEED" \
	--commit "$commit" \
	--load-before "$LOAD_BEFORE" \
	--elapsed "$(($(date +%s) - START))" | tee "$OUTFILE"
say "written to $OUTFILE"
