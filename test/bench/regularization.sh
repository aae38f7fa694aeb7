#!/bin/bash
# Held-out quality of the training benchmark's model against the
# regularization.  With the benchmark's other parameters the figures hardly
# move from 0.01 to 10 but do from about 30 up, in both directions, so a
# comparison of held-out quality with another library, or the choice of a
# default, has to say which regularization it was made at.
#
#   ./test/bench/regularization.sh [REGULARIZATION ...]
#                                  (default 0.1 30 100 200 300 500 1000)
#
# The data set, parameters and metrics of train.sh (f=64, 15 iterations,
# implicit, alpha 1, CG 3 steps, workers => 1; precision@10 and ndcg@10 as
# implicit's ranking_metrics_at_k defines them, ranking_json in lib.sh), in
# a throw-away cluster; one training and one scoring per value, about a
# minute each on the 2-core machine.  Prints a table, also written to
# test/bench/out/regularization.txt.  Nothing is asserted.
# Environment: WALS_TOOLS, the folder of gen_ratings.py (default
# ../shared/tools).
set -euo pipefail

cd "$(dirname "$0")/../.."
VALUES=${*:-0.1 30 100 200 300 500 1000}

say() { echo "regularization.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

gen_20m

RES=$(mktemp -d -t wals-regularization.XXXXXX)
trap 'rm -rf "$RES"' EXIT
chmod 755 "$RES"
say "training in a throw-away PostgreSQL 15 cluster"
if ! $PG_VIRTUALENV -t \
	-o shared_buffers=1GB \
	-o max_worker_processes=16 \
	-o max_parallel_workers=8 \
	-o max_parallel_maintenance_workers=4 \
	bash "$BENCH/regularization_db.sh" "$CACHE/$DATA" "$VALUES" "$RES/table" >&2; then
	say "failed; the cluster is dropped"
	exit 1
fi

OUTFILE=$OUTDIR/regularization.txt
{
	echo "held-out quality against the regularization: gen_ratings.py $DATA_ARGS --seed $SEED"
	echo "implicit, f=64, 15 iterations, alpha 1, CG 3 steps, workers => 1, seed 42;"
	echo "precision@10 (micro) and ndcg@10 as implicit.evaluation.ranking_metrics_at_k defines them"
	cat "$RES/table"
} | tee "$OUTFILE"
say "written to $OUTFILE"
