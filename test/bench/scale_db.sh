#!/bin/bash
# The in-database half of scale.sh: runs inside pg_virtualenv.
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

RATINGS=${SCALE_RATINGS:-100000000}
USERS=${SCALE_USERS:-666666}
ITEMS=${SCALE_ITEMS:-100000}
FACTORS=${SCALE_FACTORS:-64}
ITERATIONS=${SCALE_ITERATIONS:-3}
WORKERS=${SCALE_WORKERS:-$(( $(nproc) > 1 ? $(nproc) - 1 : 0 ))}
RES=$(mktemp -d)

say() { echo "  $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# the seconds of the statements \timing timed in file $1
timed() {
	sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' "$1" | awk '{ s += $1 } END { printf "%.2f", s / 1000 }'
}

SAMPLER=""
stop_sampler() {
	if [ -n "$SAMPLER" ]; then
		kill -TERM "$SAMPLER" 2>/dev/null || true
		wait "$SAMPLER" 2>/dev/null || true
		SAMPLER=""
	fi
}
trap 'stop_sampler; rm -rf "$RES"' EXIT

sql "CREATE EXTENSION wals"
DATA_DIR=$(sql 'SHOW data_directory')
echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores, $(awk '/^MemTotal:/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo) GB"
echo "kernels: $(sql "SELECT kernels FROM wals_devices() WHERE device = 'cpu'")"
echo "$(sql 'SELECT version()' | cut -d, -f1); wals $(sql "SELECT extversion FROM pg_extension WHERE extname = 'wals'")"
if [ -n "${SCALE_MIN_DSM:-}" ]; then
	echo "min_dynamic_shared_memory: $(sql 'SHOW min_dynamic_shared_memory'), huge_pages = $(sql 'SHOW huge_pages'); huge pages taken or reserved: $(awk '/^HugePages_Total:/ { t = $2 } /^HugePages_Free:/ { f = $2 } /^HugePages_Rsvd:/ { r = $2 } END { print t - f + r " of " t }' /proc/meminfo)"
fi

say "making $RATINGS ratings of $USERS users and $ITEMS items"
# Vacuumed as well: the table at rest, as autovacuum leaves one that a
# nightly training reads (its pages all visible), and no vacuum of its
# own, which the insert would set off, running under the timings.
t0=$(now)
$PSQL <<SQL
CREATE UNLOGGED TABLE r (user_id bigint, item_id bigint, rating real);
INSERT INTO r
SELECT i % $USERS + 1,
       floor($ITEMS * power((hashint8(i) & 2147483647)::float8 / 2147483648, 2.5))::bigint + 1,
       (i % 5) + 1
FROM (SELECT generate_series(0, $RATINGS - 1) AS i) s;
VACUUM ANALYZE r;
SQL
echo "ratings: $(sql 'SELECT count(*) FROM r') rows, $(sql "SELECT pg_size_pretty(pg_table_size('r'))"), made in $(since "$t0") s"
# and written out, which the kernel would otherwise do under the timings
dirty() { awk '/^Dirty:/ { printf "%.0f MB", $2 / 1024 }' /proc/meminfo; }
echo "dirty pages: $(dirty); after sync: $(sync; dirty)"

sum_s() {
	$PSQL -At -c "SET max_parallel_workers_per_gather = $1" -c '\timing on' \
		-c 'SELECT sum(rating) FROM r' | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' |
		awk '{ printf "%.2f", $1 / 1000 }'
}
sum_s 0 > /dev/null
SUM_ALONE=$(sum_s 0)
SUM_WORKERS=$(sum_s "$WORKERS")
echo "sum() over the table: $SUM_ALONE s alone, $SUM_WORKERS s with $WORKERS workers"

# train MODEL MAX_MEMORY: one training with the figures of it; MAX_MEMORY
# (kB, 0: none) is wals.max_memory, under which the ratings may go to
# temporary files (out of core)
train() {
	say "training $1 (wals.max_memory = $2 kB): f = $FACTORS, $ITERATIONS iterations, $WORKERS workers"
	rm -f "$RES/pid" "$RES/tmp"
	$PY "$BENCH/mem_sampler.py" --own "$RES/pid" > "$RES/mem" &
	SAMPLER=$!
	# the temporary files' peak, sampled beside the memory
	(while [ ! -s "$RES/pid" ]; do sleep 0.05; done
	 while kill -0 "$SAMPLER" 2>/dev/null; do
		du -sk "$TMPFILES" 2>/dev/null | cut -f1
		sleep 0.5
	 done > "$RES/tmp") &
	$PSQL -At > "$RES/train" <<SQL
SELECT pg_backend_pid() \g $RES/pid
SET client_min_messages = warning;
SET wals.max_memory = $2;
SELECT load_s || ' ' || train_s || ' ' || store_s || ' ' || ratings
FROM wals_train('r', 'user_id', 'item_id', 'rating', model => '$1', factors => $FACTORS,
                iterations => $ITERATIONS, workers => $WORKERS);
SELECT workers FROM wals_models WHERE model = '$1';
SELECT string_agg(round(l.seconds::numeric, 2)::text, ' ' ORDER BY l.iteration)
FROM wals_training_log l JOIN wals_models m
  ON m.model = l.model AND m.schema = l.schema AND m.version = l.version
WHERE m.model = '$1';
SQL
	stop_sampler
	wait
	read -r load_s train_s store_s cells < <(sed -n 1p "$RES/train")
	launched=$(sed -n 2p "$RES/train")
	iters=$(sed -n 3p "$RES/train")
	field() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$RES/mem"; }
	echo "trained $1: $cells distinct ratings, $launched workers launched, wals.max_memory = $2 kB"
	echo "  load (read and build): $load_s s; train: $train_s s (iterations: $iters s); store: $store_s s"
	echo "  per rating, an iteration: $(echo "$iters" | awk -v n="$cells" '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.1f", 1e9 * s / NF / n }') ns"
	OWN_KB=$(( $(field own_peak_kb) - $(field own_first_kb) ))
	if [ -n "${SCALE_MIN_DSM:-}" ]; then
		echo "  memory: not sampled, the segments are carved from min_dynamic_shared_memory"
	else
		awk -v m="$OWN_KB" -v n="$cells" -v u="$USERS" -v i="$ITEMS" -v k="$FACTORS" 'BEGIN {
			m *= 1024; x = 4 * k * (u + i)
			printf "  memory the training allocates, leader and workers (private memory and shared segments, peak less the first sample): %.0f MB, %.1f bytes a rating; less the factors (%.0f MB): %.1f bytes a rating\n", m / 1048576, m / n, x / 1048576, (m - x) / n }'
	fi
	echo "  temporary files, peak: $(sort -n "$RES/tmp" | tail -1 | awk '{ printf "%.0f MB", $1 / 1024 }')"
}

# cgroup_train MB MAX_MEMORY: train out of core with the server's new
# backends in a memory cgroup of MB (v2, or v1's memory controller), whose
# page cache is charged to it; needs root
cgroup_train() {
	local postmaster cg root
	postmaster=$(head -1 "$DATA_DIR/postmaster.pid")
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		root=/sys/fs/cgroup
		cg=$root/wals_bench_scale
		mkdir -p "$cg"
		echo $(( $1 * 1048576 )) > "$cg/memory.max"
	elif [ -d /sys/fs/cgroup/memory ]; then
		root=/sys/fs/cgroup/memory
		cg=$root/wals_bench_scale
		mkdir -p "$cg"
		echo $(( $1 * 1048576 )) > "$cg/memory.limit_in_bytes"
	else
		echo "no memory cgroup here: SCALE_CGROUP_MB is left out"
		return
	fi
	echo "$postmaster" > "$cg/cgroup.procs"
	train spilled_cgroup "$2"
	echo "  in a memory cgroup of $1 MB: $(grep -E '^(pgmajfault|file|cache) ' "$cg/memory.stat" | tr '\n' ' ')$( [ -f "$cg/memory.failcnt" ] && echo "limit hit $(cat "$cg/memory.failcnt") times")"
	echo "$postmaster" > "$root/cgroup.procs"
	rmdir "$cg" 2>/dev/null || true
}

TMPFILES=$DATA_DIR/base/pgsql_tmp
train big 0
BIG_LOAD_S=$load_s
echo "  the load against sum() with $WORKERS workers: $(ratio "$load_s" "$SUM_WORKERS")x"
IN_MEMORY_KB=$OWN_KB
BIG_STORE_S=$store_s
# the first training faulted the pool's pages in; a nightly one reuses them
if [ -n "${SCALE_MIN_DSM:-}" ]; then
	train big_again 0
fi
# The store against COPY: the same rows, written out by COPY, loaded by
# COPY into new tables of the same columns and storage, and their primary
# keys built, in one transaction as the store's tables are; the statements
# timed, not the commit, as store_s times the store and not the commit.
copy_store() {
	local dir=$DATA_DIR
	sql "COPY big_user_factors TO '$dir/wals_copy_u.bin' (FORMAT binary);
		COPY big_item_factors TO '$dir/wals_copy_i.bin' (FORMAT binary)" > /dev/null
	$PSQL -At > "$RES/copy" <<SQL
\\timing on
BEGIN;
CREATE TABLE copy_u (LIKE big_user_factors INCLUDING STORAGE);
COPY copy_u FROM '$dir/wals_copy_u.bin' (FORMAT binary);
ALTER TABLE copy_u ADD PRIMARY KEY (user_id);
CREATE TABLE copy_i (LIKE big_item_factors INCLUDING STORAGE);
COPY copy_i FROM '$dir/wals_copy_i.bin' (FORMAT binary);
ALTER TABLE copy_i ADD PRIMARY KEY (item_id);
\\timing off
COMMIT;
SQL
	echo "the same rows by COPY into new tables, their primary keys built: $(timed "$RES/copy") s (the store of big: $(printf %.2f "$BIG_STORE_S") s)"
}
copy_store

if [ -n "${SCALE_OUT_OF_CORE:-}" ] && [ -n "${SCALE_MIN_DSM:-}" ]; then
	echo "out of core: left out with SCALE_MIN_DSM, which leaves the memory it halves unsampled"
elif [ -n "${SCALE_OUT_OF_CORE:-}" ]; then
	# out of core at half the memory the training in memory allocated
	train spilled $(( IN_MEMORY_KB / 2 ))
	echo "  factor rows that differ from the training in memory: $(sql "SELECT
		(SELECT count(*) FROM ((TABLE big_user_factors EXCEPT ALL TABLE spilled_user_factors)
		 UNION ALL (TABLE spilled_user_factors EXCEPT ALL TABLE big_user_factors)) d) +
		(SELECT count(*) FROM ((TABLE big_item_factors EXCEPT ALL TABLE spilled_item_factors)
		 UNION ALL (TABLE spilled_item_factors EXCEPT ALL TABLE big_item_factors)) d)")"
	if [ -n "${SCALE_CGROUP_MB:-}" ]; then
		cgroup_train "$SCALE_CGROUP_MB" $(( IN_MEMORY_KB / 2 ))
	fi
fi

# A retraining as a nightly schedule runs one: the model's own tables
# written again in place, their rows deleted and the new ones inserted
# with the primary key kept up to date, which a store into new tables
# does not do.  One iteration: only its store is of interest.
say "retraining big into its own tables: f = $FACTORS, 1 iteration, $WORKERS workers"
sql "VACUUM big_user_factors, big_item_factors" > /dev/null
sql "CHECKPOINT" > /dev/null
echo "retrained big into its own tables: store $(sql "SET client_min_messages = warning;
	SELECT round(store_s::numeric, 2) FROM wals_train('r', 'user_id', 'item_id', 'rating',
	model => 'big', factors => $FACTORS, iterations => 1, workers => $WORKERS,
	replace => true)") s"
# What COPY does in its place: the tables COPY filled above, every row
# deleted and the rows loaded again in one transaction, the primary keys
# kept up to date; a checkpoint just before each, so that both write a
# full image of every page they touch first, as a nightly one does.
sql "VACUUM copy_u, copy_i" > /dev/null
sql "CHECKPOINT" > /dev/null
$PSQL -At > "$RES/copy_again" <<SQL
\\timing on
BEGIN;
DELETE FROM copy_u;
COPY copy_u FROM '$DATA_DIR/wals_copy_u.bin' (FORMAT binary);
DELETE FROM copy_i;
COPY copy_i FROM '$DATA_DIR/wals_copy_i.bin' (FORMAT binary);
\\timing off
COMMIT;
SQL
rm -f "$DATA_DIR/wals_copy_u.bin" "$DATA_DIR/wals_copy_i.bin"
sql "DROP TABLE copy_u, copy_i" > /dev/null
echo "the same, every row deleted and loaded again by COPY: $(timed "$RES/copy_again") s"
# as at the start: the trainings' writes synced, the table read once first
sync
sum_s "$WORKERS" > /dev/null
SUM_AFTER=$(sum_s "$WORKERS")
echo "sum() over the table with $WORKERS workers, again after the trainings: $SUM_AFTER s (the load of big $(ratio "$BIG_LOAD_S" "$SUM_AFTER")x it)"
