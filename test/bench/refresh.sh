#!/bin/bash
# Refresh benchmark: what wals_refresh costs against a full wals_retrain on
# the 15.5M set of the training benchmark (gen_20m in lib.sh: both of its
# splits, 15.5M ratings, 138,000 users, 27,000 items), against the targets
# of issue 44 (1% new ratings: at most 10% of the retrain's time; 0.1%: at
# most 2%).
#
#   ./test/bench/refresh.sh        (from the repository root, as root, with
#                                   the extension built and installed; or
#                                   `make bench-refresh`, which does both;
#                                   where others install wals too, hold
#                                   their lock through the run)
#
# 1. generates the set once into test/bench/cache/ (that of train.sh);
# 2. in a throw-away cluster (pg_virtualenv -t) loads it into a table with a
#    column ts (bigint, the order of loading), indexed on ts (what
#    wals_refresh reads), on (user_id, item_id) (the changed pairs and the
#    users' ratings) and on item_id (solve_items => 'touched');
# 3. holds back 1% of the rows: every row of a few users and of a few items
#    (new users and new items to the model), then a share (0.3) of the rows
#    of users drawn one by one, as a span of time holds the ratings of the
#    users active in it (REFRESH_SPREAD=sessions, the default), or rows
#    drawn at random (REFRESH_SPREAD=random: each touches another user);
#    trains three models with changed_col => 'ts' and the training
#    benchmark's settings (f = 64, 15 CG iterations of 3 steps, implicit,
#    workers => 1), times a full wals_retrain, inserts the rows held back
#    with higher ts and times wals_refresh, solve_items => 'new',
#    'changed' (the default) and 'touched', one on each model;
# 4. the same with 0.1% (a part of the 1%: its rows are deleted again, the
#    models retrained, the retrain timed, the rows inserted again);
# 5. times wals_refresh_items on REFRESH_ITEMS (default 100) items drawn at
#    random and on the as many most rated;
# 6. prints the CPU, the kernels and the figures, also written to
#    test/bench/out/refresh.txt.
#
# Nothing is asserted.  About 6 minutes on 2 cores once the data is cached.
# Environment: WALS_TOOLS, the folder of gen_ratings.py (default
# ../shared/tools); REFRESH_FRACTIONS (default "0.01 0.001"),
# REFRESH_WORKERS (default 1), REFRESH_ITEMS (default 100), REFRESH_SPREAD
# (sessions or random, default sessions).
set -euo pipefail

cd "$(dirname "$0")/../.."

say() { echo "refresh.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

gen_20m

say "refreshing in a throw-away PostgreSQL cluster"
if ! $PG_VIRTUALENV -t \
	-o shared_buffers=1GB \
	-o max_worker_processes=16 \
	-o max_parallel_workers=8 \
	-o max_parallel_maintenance_workers=4 \
	-o maintenance_work_mem=512MB \
	-o max_wal_size=4GB \
	bash "$BENCH/refresh_db.sh" "$CACHE/$DATA" | tee "$OUTDIR/refresh.txt"; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi
say "written to $OUTDIR/refresh.txt"
