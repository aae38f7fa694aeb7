#!/bin/bash
# Quality and single-process speed benchmark of wals against ref_wals.py.
#
#   ./test/bench/quality.sh          (from the repository root, as root, with
#                                     the extension built and installed; or
#                                     `make bench`, which does both first)
#
# 1. generates the data sets once into test/bench/cache/ (gen_ratings.py):
#    implicit and explicit quality sets (10k users, 5k items, 10% held out)
#    and a ~1M-rating implicit set for timing;
# 2. runs ref_wals.py on the two quality sets with seeds 0-4, and once more
#    from the very factors wals starts from (ref_from_our_init.py), its JSON
#    cached in test/bench/cache/ under a key of its parameters, the tools'
#    and the data files' checksums (about 20 s a run on 2 cores, once);
# 3. in a throw-away cluster (pg_virtualenv -t), loads the data with \copy,
#    trains with both solvers and seeds 42-46, computes the held-out metrics
#    in SQL (test/bench/quality_db.sh) and times ~1M-rating trainings in one
#    process;
# 4. prints the tables (test/bench/compare.py), also written to
#    test/bench/out/quality-<date>.txt.
#
# Nothing is asserted: figures are printed, with PASS/MISS against the 1%
# quality target of doc/performance.md (Targets), for (a) ref_wals seed 0 against our
# seed 42, (b) the means over the seeds, (c) the same starting factors.
# Environment: WALS_TOOLS, the folder of gen_ratings.py and ref_wals.py
# (default ../shared/tools).
set -eu
set -o pipefail

cd "$(dirname "$0")/../.."

say() { echo "quality.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

# --- dependencies -----------------------------------------------------------
bench_prepare gen_ratings.py ref_wals.py

# --- data -------------------------------------------------------------------
QUALITY_ARGS="--users 10000 --items 5000 --nnz 500000 --test-fraction 0.1"
SPEED_ARGS="--users 20000 --items 8000 --nnz 1250000"
IMP=implicit-u10000-i5000-n500000-s$SEED
EXP=explicit-u10000-i5000-n500000-s$SEED
SPD=implicit-u20000-i8000-n1250000-s$SEED
gen $IMP $QUALITY_ARGS
gen $EXP $QUALITY_ARGS --explicit
gen $SPD $SPEED_ARGS

# --- reference ----------------------------------------------------------------
# The quality runs' parameters, the same for ref_wals.py and wals_train.
FACTORS=32
ITERATIONS=15
REG=0.05
ALPHA=1
REF_PARAMS="--factors $FACTORS --iterations $ITERATIONS --reg $REG --alpha $ALPHA"
# ref_wals.py's seeds (0 is its default, the headline comparison) and ours
# (42 is wals_train's default): a few of each, so that the spread due to the
# random start can be read beside the differences.
REF_SEEDS="0 1 2 3 4"
OUR_SEEDS="42 43 44 45 46"

# ref NAME FEEDBACK SEED [wals-init]: ref_wals.py on NAME.csv / NAME.test.csv,
# from its own random start, or with "wals-init" from the start wals draws
# for that seed (ref_from_our_init.py); prints the path of its cached JSON.
ref() {
	name=$1
	feedback=$2
	seed=$3
	init=${4:-}
	sums=$(cat "$TOOLS/ref_wals.py" ${init:+"$BENCH/ref_from_our_init.py"} | md5sum | cut -c1-8)
	sums=$sums-$(cat "$CACHE/$name.csv" "$CACHE/$name.test.csv" | md5sum | cut -c1-8)
	if [ -n "$init" ]; then
		key=f$FACTORS-it$ITERATIONS-reg$REG-a$ALPHA-$feedback-walsinit$seed
		run="$BENCH/ref_from_our_init.py $TOOLS $seed"
	else
		key=f$FACTORS-it$ITERATIONS-reg$REG-a$ALPHA-$feedback-seed$seed
		run="$TOOLS/ref_wals.py --seed $seed"
	fi
	out=$CACHE/ref-$name-$key-$sums.json
	if [ ! -s "$out" ]; then
		say "running ref_wals.py --feedback $feedback on $name, ${init:-seed} $seed (about 20 s)"
		$PY $run --train "$CACHE/$name.csv" --test "$CACHE/$name.test.csv" \
			$REF_PARAMS --feedback "$feedback" > "$out.tmp"
		mv "$out.tmp" "$out"
	fi
	echo "$out"
}
REF_IMP=""
REF_EXP=""
for seed in $REF_SEEDS; do
	REF_IMP="$REF_IMP $(ref $IMP implicit $seed)"
	REF_EXP="$REF_EXP $(ref $EXP explicit $seed)"
done
first_seed=${OUR_SEEDS%% *}
REF_IMP_INIT=$(ref $IMP implicit $first_seed wals-init)
REF_EXP_INIT=$(ref $EXP explicit $first_seed wals-init)

# --- the database -------------------------------------------------------------
RES=$(mktemp -d -t wals-quality.XXXXXX)
trap 'rm -rf "$RES"' EXIT
chmod 755 "$RES"
say "training and evaluating in a throw-away PostgreSQL 15 cluster"
# -t: a private cluster directory even as root, so that concurrent test runs
# (which use the shared 15/regress cluster name) do not collide with us.
$PG_VIRTUALENV -t sh "$BENCH/quality_db.sh" "$CACHE" "$RES" "$IMP" "$EXP" "$SPD" \
	"$FACTORS" "$ITERATIONS" "$REG" "$ALPHA" "$OUR_SEEDS" >&2

# --- the report ---------------------------------------------------------------
DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
OUTFILE=$OUTDIR/quality-$(date -u +%Y%m%d-%H%M%S).txt

rows() { wc -l < "$1" | tr -d ' '; }

report() {
	echo "wals quality benchmark, $DATE"
	echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)," \
		"$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) memory"
	echo "PostgreSQL: $($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_version"])' "$RES/server.json")"
	commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
	[ -z "$(git -C "$ROOT" status --porcelain -- src sql 2>/dev/null)" ] || commit="$commit (src or sql modified)"
	echo "wals: $commit, BLAS: $(readlink -f /usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so 2>/dev/null || echo '?')"
	echo "data (gen_ratings.py --seed $SEED):"
	echo "  implicit quality: $QUALITY_ARGS -> $(rows "$CACHE/$IMP.csv") train rows, $(rows "$CACHE/$IMP.test.csv") test rows"
	echo "  explicit quality: $QUALITY_ARGS --explicit -> $(rows "$CACHE/$EXP.csv") train rows, $(rows "$CACHE/$EXP.test.csv") test rows"
	echo "  speed:            $SPEED_ARGS -> $(rows "$CACHE/$SPD.csv") rows"
	echo "reference: ref_wals.py $REF_PARAMS (float64, exact solves), seeds $REF_SEEDS;"
	echo "  ours: wals_train, float32, seeds $OUR_SEEDS; headline: ref_wals seed ${REF_SEEDS%% *} against our seed $first_seed"
	echo
	$PY "$BENCH/compare.py" --res "$RES" --ref-implicit $REF_IMP --ref-explicit $REF_EXP \
		--ref-implicit-wals-init "$REF_IMP_INIT" --ref-explicit-wals-init "$REF_EXP_INIT" \
		--ref-seeds $REF_SEEDS --our-seeds $OUR_SEEDS
}
report | tee "$OUTFILE"
say "written to $OUTFILE"
