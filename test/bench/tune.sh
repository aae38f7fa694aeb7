#!/bin/bash
# Tuning benchmark: held-out quality of a model trained with the defaults
# against one trained by wals_tune with a budget, side by side, and where
# the tuning's time went.
#
#   ./test/bench/tune.sh           (from the repository root, as root, with
#                                   the extension built and installed; or
#                                   `make bench-tune`, which does both first)
#   TUNE_CALL=procedure make bench-tune
#                                  tune with CALL wals_tune_concurrently,
#                                  which commits after each trial, instead
#                                  of SELECT ... FROM wals_tune(...)
#   RATINGS=train.csv TEST=test.csv make bench-tune
#                                  a data set of your own: headerless
#                                  user_id,item_id[,rating] CSVs of the
#                                  training and the test split
#
# 1. generates the 20M set of the other benchmarks once into
#    test/bench/cache/ (gen_ratings.py --users 138000 --items 27000 --nnz
#    20000000, with a 2% held-out split); TUNE_SET=gowalla takes the
#    Gowalla-shaped set of evaluate.sh instead, RATINGS and TEST your files;
# 2. in a throw-away cluster trains f = 64 with the defaults, then runs
#    wals_tune (budget TUNE_BUDGET, default '10 minutes'; metric
#    TUNE_METRIC, default 'recall@20'; its validation share comes out of
#    the training rows, never out of the test split);
# 3. prints the CPU, the kernels, every trial, the seconds wals_tune took
#    against its budget (its final training included), the parameters chosen, the
#    seconds the trials spent training and scoring their validation, and
#    wals_evaluate's precision, recall and ndcg at 20 of both models on the
#    test split.
#
# Nothing is asserted.  Environment: WALS_TOOLS, the folder of
# gen_ratings.py (default ../shared/tools).
set -euo pipefail

cd "$(dirname "$0")/../.."

say() { echo "tune.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

if [ -n "${RATINGS:-}" ]; then
	if [ -z "${TEST:-}" ]; then
		say "RATINGS needs TEST, the test split of the same data"
		exit 1
	fi
	train=$(abspath "$RATINGS")
	test=$(abspath "$TEST")
else
	case ${TUNE_SET:-20m} in
	20m) gen_20m ;;
	gowalla) gen_gowalla ;;
	*) say "unknown TUNE_SET $TUNE_SET (20m or gowalla)"; exit 1 ;;
	esac
	train=$CACHE/$DATA.csv
	test=$CACHE/$DATA.test.csv
fi

say "tuning in a throw-away PostgreSQL 15 cluster"
if ! $PG_VIRTUALENV -t -o shared_buffers=1GB -o max_worker_processes=16 \
	-o max_parallel_workers=8 -o max_parallel_maintenance_workers=4 \
	bash "$BENCH/tune_db.sh" "$train" "$test" "${TUNE_BUDGET:-10 minutes}" \
	"${TUNE_METRIC:-recall@20}" | tee "$OUTDIR/tune.txt"; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi
say "written to $OUTDIR/tune.txt"
