#!/bin/bash
# Acceleration benchmark: plain ALS-CG against ALS-NCG and the subspace
# solver (iALS++), to the loss of 15 plain CG iterations.
#
#   ./test/bench/accel.sh          (from the repository root, as root, with
#                                   the extension built and installed; or
#                                   `make bench-accel`, which does both first)
#
# 1. generates the two data sets once into test/bench/cache/: the 20M one
#    of the other benchmarks (gen_ratings.py --users 138000 --items 27000
#    --nnz 20000000) and a 5M one (--users 35000 --items 7000 --nnz 5000000),
#    each with a 2% held-out split;
# 2. in a throw-away cluster (pg_virtualenv -t) trains, for each set and
#    each f of ACCEL_FACTORS (default "64 256 1024"), ACCEL_ITERATIONS
#    (default 15) iterations of: CG, CG with NCG, subspace (default
#    block_size), subspace with NCG, and at the f of ACCEL_CHOLESKY_FACTORS
#    (default "64 512", empty for none) Cholesky and subspace for the
#    quality comparison, every run with workers => 1 (two processes on the
#    2-core machine);
# 3. prints, per run: seconds per iteration, the iterations and seconds to
#    come within 0.1% of plain CG's last loss, the final loss, and
#    precision@10 and ndcg@10 on the held-out split (the ref_wals
#    definition of lib.sh); writes every iteration's loss and time to
#    test/bench/out/accel.csv and the plot test/bench/out/accel.svg.
#
# Nothing is asserted.  ACCEL_SETS (default "5m 20m") picks the data sets.
# Large f on the 20M set takes long (one CG iteration at f = 1024 is about
# a minute on 2 cores).  Environment: WALS_TOOLS, the folder of
# gen_ratings.py (default ../shared/tools).
set -euo pipefail

cd "$(dirname "$0")/../.."

say() { echo "accel.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

SETS=${ACCEL_SETS:-5m 20m}
DATAS=""
for set in $SETS; do
	case $set in
	20m) gen_20m ;;
	5m)
		DATA=implicit-u35000-i7000-n5000000-s$SEED
		gen "$DATA" --users 35000 --items 7000 --nnz 5000000 --test-fraction 0.02
		;;
	*) say "unknown set $set (5m or 20m)"; exit 1 ;;
	esac
	DATAS="$DATAS $set=$CACHE/$DATA"
done

RES=$(mktemp -d -t wals-accel.XXXXXX)
trap 'rm -rf "$RES"' EXIT
chmod 755 "$RES"

say "training in a throw-away PostgreSQL 15 cluster"
if ! $PG_VIRTUALENV -t \
	-o shared_buffers=1GB \
	-o max_worker_processes=16 \
	-o max_parallel_workers=8 \
	-o max_parallel_maintenance_workers=4 \
	bash "$BENCH/accel_db.sh" "$RES" $DATAS >&2; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi

cp "$RES/accel.csv" "$OUTDIR/accel.csv"
$PY "$BENCH/accel_report.py" "$RES/accel.csv" "$OUTDIR/accel.svg" | tee "$OUTDIR/accel.txt"
say "written to $OUTDIR/accel.txt, accel.csv and accel.svg"
