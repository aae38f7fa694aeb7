#!/bin/sh
# Serving benchmark at MovieLens-20M size, against the targets of
# doc/performance.md.
#
#   ./test/bench/serve.sh          (from the repository root, as root, with
#                                   the extension built and installed; or
#                                   `make bench-serve`, which does both first)
#
# 1. generates the training benchmark's data set once into
#    test/bench/cache/ (gen_20m in lib.sh; the training split, 15.2M
#    ratings of 138,000 users and 27,000 items, is used);
# 2. in a throw-away cluster (pg_virtualenv -t) with shared_buffers = 2GB,
#    loads it, trains f=64, 15 iterations, workers => 1, and reads the
#    source, its user index and the factor tables into shared buffers
#    (pg_prewarm; serve_db.sh says why);
# 3. times wals_recommend(user, 10) in the server over 300 users, with
#    exclude_rated true and false, in two rounds after a warm-up pass;
#    pgbench -M prepared at 1 and 2 clients; wals_recommend_batch for every
#    user and for a million unknown users; the same top-10 in plain SQL,
#    which must agree with wals_recommend's; and pgvector's exact scan and HNSW index where the
#    vector extension is installed (serve_db.sh);
# 4. prints the figures beside the targets, also written to
#    test/bench/out/serve.txt.
#
# Exits non-zero when the plain-SQL top-10 of some user differs from
# wals_recommend's; timings are printed, never asserted.  About 3 minutes on
# the 2-core machine once the data set is cached.
# Environment: WALS_TOOLS, the folder of gen_ratings.py (default
# ../shared/tools).
set -eu

cd "$(dirname "$0")/../.."
START=$(date +%s)

say() { echo "serve.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py

gen_20m

RES=$(mktemp -d -t wals-serve.XXXXXX)
trap 'rm -rf "$RES"' EXIT

say "serving in a throw-away PostgreSQL 15 cluster"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# -t: a private cluster directory even as root, so that concurrent runs do
# not collide with us.  shared_buffers holds the source, its user index
# and the factor tables (about 800 MB), so that the timed calls read
# nothing from outside it.
if ! $PG_VIRTUALENV -t -o shared_buffers=2GB \
	sh "$BENCH/serve_db.sh" "$CACHE/$DATA" "$RES" >&2; then
	say "failed (the end of the server log, if any, is above); the cluster is dropped"
	exit 1
fi

OUTFILE=$OUTDIR/serve.txt
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
if [ -n "$(git -C "$ROOT" status --porcelain -- src sql 2>/dev/null)" ]; then
	commit="$commit (src or sql modified)"
fi
elapsed=$(($(date +%s) - START))
{
	echo "wals serving benchmark, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)," \
		"$(grep -c '^processor' /proc/cpuinfo) cores," \
		"$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) memory;" \
		"shared with other work, so timings are noisy"
	echo "commit: $commit"
	echo "data: gen_ratings.py $DATA_ARGS --seed $SEED, the training split"
	cat "$RES/body"
	echo ""
	echo "targets (doc/performance.md; its peer figures were measured on the same 2-core machine kind):"
	cat "$RES/summary"
	echo ""
	echo "benchmark run time: $((elapsed / 60)) min $((elapsed % 60)) s;" \
		"load average (1, 5, 15 min) before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUTFILE"
cat "$OUTFILE"
say "written to $OUTFILE"

if [ -f "$RES/disagree" ]; then
	say "the plain-SQL top-10 differs from wals_recommend's for some users (see AGREEMENT above)"
	exit 1
fi
