#!/bin/bash
# Sharded training benchmark: the 20M set (f = 64) trained on one server
# (the leader and nproc - 1 parallel workers) and on 1, 2 and 3 local
# shards (postgres_fdw foreign partitions by user, on servers of this
# machine), 10 iterations each: seconds per iteration (median of iterations
# 2 to 10), the bytes sent to the shards and received from them in an
# iteration (as the training's last NOTICE counts them) beside the
# formula's, the peak memory of each shard's backend (VmHWM) and of the
# one-server backend, and the loss of the last iteration of each.
#
#   ./test/bench/shards.sh      (from the repository's root, as root, with
#                                the extension installed; or make bench-shards)
#   SHARDS_SET=5m               the 5M set instead (35,000 x 7,000)
#   SHARDS_COUNTS="1 2"         the shard counts to run (default: 1 2 3)
#   SHARDS_KERNELS=avx2         wals.kernels on every server (default: auto)
# Where the server has Citus (make test-citus builds and installs it from a
# source tree), the same set is then trained over a Citus distributed table
# by user on 1, 2 and 3 worker nodes (SHARDS_COUNTS), Citus's 32 shards,
# a database of its own for each count; SHARDS_CITUS=0 leaves it out.  A
# node's memory is not reported there: a training reads a node on
# connections of its own, which a later query through Citus does not reach.
# The report goes to test/bench/out/shards.txt.
set -euo pipefail

cd "$(dirname "$0")/../.."
START=$(date +%s)

say() { echo "shards.sh: $*" >&2; }

# shellcheck source=test/bench/lib.sh
. test/bench/lib.sh

bench_prepare gen_ratings.py
if [ "${SHARDS_SET:-20m}" = 5m ]; then
	DATA=implicit-u35000-i7000-n5000000-s$SEED
	gen "$DATA" --users 35000 --items 7000 --nnz 5000000 --test-fraction 0.02
else
	gen_20m
fi
COUNTS=${SHARDS_COUNTS:-1 2 3}
MAXN=0
for n in $COUNTS; do [ "$n" -gt "$MAXN" ] && MAXN=$n; done

BIN=$("$PG_CONFIG" --bindir)
RES=$(mktemp -d -t wals-shards.XXXXXX)
chown postgres "$RES"
as_pg() { runuser -u postgres -- "$@"; }
# q PORT ARGS...: psql on the server of PORT, in the database DB names
# (postgres where it names none)
q() {
	port=$1
	shift
	as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$RES" -p "$port" -d "${DB:-postgres}" -At "$@"
}
stop_all() {
	for d in "$RES"/*/; do
		[ -f "$d/postmaster.pid" ] && as_pg "$BIN/pg_ctl" -D "$d" -m fast stop >/dev/null 2>&1
	done
	[ -n "${KEEP:-}" ] || rm -rf "$RES"
}
trap stop_all EXIT

# cluster NAME PORT [LIBRARIES]: a new server in RES, listening on its
# socket there, with shared_preload_libraries = LIBRARIES
cluster() {
	as_pg "$BIN/initdb" -D "$RES/$1" -A trust >/dev/null
	cat >>"$RES/$1/postgresql.conf" <<EOF
port = $2
shared_preload_libraries = '${3:-}'
listen_addresses = ''
unix_socket_directories = '$RES'
shared_buffers = 1GB
max_worker_processes = 16
max_parallel_workers = 8
max_parallel_maintenance_workers = $(($(nproc) - 1))
wals.kernels = '${SHARDS_KERNELS:-auto}'
EOF
	as_pg "$BIN/pg_ctl" -D "$RES/$1" -l "$RES/$1.log" -w start >/dev/null
}

COORD=55400
say "starting a coordinator and $MAXN shard servers in $RES"
cluster coord $COORD
# The memory of the backend that runs this query: a shard's, when it is
# read through postgres_fdw on the training's own connection.
MEMVIEW="CREATE VIEW backend_memory AS SELECT (regexp_match(pg_read_file('/proc/' ||
  pg_backend_pid() || '/status'), 'VmHWM:\\s+([0-9]+) kB'))[1]::bigint AS peak_kb"
q $COORD -c "CREATE EXTENSION wals" -c "CREATE EXTENSION postgres_fdw" -c "$MEMVIEW"
for k in $(seq 0 $((MAXN - 1))); do
	port=$((COORD + 1 + k))
	cluster "shard$k" $port
	q $port -c "CREATE EXTENSION wals" -c "$MEMVIEW" \
		-c "CREATE TABLE ratings_part (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)"
	q $COORD -c "CREATE SERVER shard$k FOREIGN DATA WRAPPER postgres_fdw
		OPTIONS (host '$RES', port '$port', dbname 'postgres')" \
		-c "CREATE USER MAPPING FOR CURRENT_USER SERVER shard$k" \
		-c "CREATE FOREIGN TABLE memory_$k (peak_kb bigint) SERVER shard$k
		OPTIONS (table_name 'backend_memory')"
done
chmod 644 "$CACHE/$DATA.csv"
say "loading $DATA on one server"
q $COORD -c "CREATE TABLE ratings_here (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)" \
	-c "\\copy ratings_here FROM '$CACHE/$DATA.csv' WITH (FORMAT csv)" -c "VACUUM ANALYZE ratings_here"

TRAIN_ARGS="factors => 64, iterations => ${SHARDS_ITERATIONS:-10}"

# train MODEL SOURCE WORKERS MEMORY [PORT]: one training, on the server of
# PORT (the coordinator's); prints seconds an iteration, the peak memory
# of the backends that MEMORY reads, in kB ('-' where it reads none), and
# the last loss; its NOTICEs go to RES/notices
train() {
	q "${5:-$COORD}" -F ' ' -c "SET client_min_messages = notice" -c "
SELECT iterations FROM wals_train('$2', 'user_id', 'item_id', 'rating', model => '$1',
  $TRAIN_ARGS, workers => $3)" -c "
SELECT (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l.seconds)
        FROM wals_training_log l JOIN wals_models m USING (schema, model, version)
        WHERE l.model = '$1' AND l.iteration > 1),
       (SELECT coalesce(string_agg(peak_kb::text, '/'), '-') FROM ($4) t),
       (SELECT loss FROM wals_models WHERE model = '$1')" 2>"$RES/notices" | tail -n 1
}

# row LABEL N PER_IT PEAK LOSS: the results of a training on N shards, with
# the bytes moved and the memory held that its NOTICEs said
row() {
	moved=$(sed -n 's/.*received from them, \(.*\) an iteration;.*/\1/p' "$RES/notices")
	held=$(sed -n 's/.*each held at most \(.*\) and solved with.*/\1/p' "$RES/notices" | sed 's/, /\//g')
	formula=$(($2 > 1 ? 4 * 64 * $2 * (users + items) : 0))
	printf '%s\t%s\t%s\t%s MB\t%s\t%s\t%s\n' "$1" "$3" "$moved" "$((formula / 1000000))" \
		"$held" "$4" "$5" >>"$RES/results.tsv"
}

printf 'setup\ts/iteration\tbytes an iteration\t(formula)\ttraining memory\tpeak RSS kB per backend\tloss\n' >"$RES/results.tsv"
say "training on one server (workers => $(($(nproc) - 1)))"
read -r per_it peak loss < <(train here ratings_here $(($(nproc) - 1)) "SELECT peak_kb FROM backend_memory")
held=$(sed -n 's/.*The training needs about \(.*\), leader and workers together\./\1/p' "$RES/notices")
printf 'one server\t%s\t-\t-\t%s\t%s\t%s\n' "$per_it" "$held" "$peak" "$loss" >>"$RES/results.tsv"
users=$(q $COORD -c "SELECT users FROM wals_models WHERE model = 'here'")
items=$(q $COORD -c "SELECT items FROM wals_models WHERE model = 'here'")

for n in $COUNTS; do
	say "$n shards: loading each its users (user_id % $n)"
	awk -F, -v n="$n" -v dir="$RES" '{ print > (dir "/part" ($1 % n) ".csv") }' "$CACHE/$DATA.csv"
	chmod 644 "$RES"/part*.csv
	parts=""
	for k in $(seq 0 $((n - 1))); do
		q $((COORD + 1 + k)) -c "TRUNCATE ratings_part" \
			-c "\\copy ratings_part FROM '$RES/part$k.csv' WITH (FORMAT csv)" \
			-c "VACUUM ANALYZE ratings_part"
		parts="$parts CREATE FOREIGN TABLE ratings_$k PARTITION OF ratings FOR VALUES IN ($k)
			SERVER shard$k OPTIONS (table_name 'ratings_part');"
	done
	rm -f "$RES"/part*.csv
	q $COORD -c "DROP TABLE IF EXISTS ratings" \
		-c "CREATE TABLE ratings (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)
			PARTITION BY LIST ((user_id % $n))" -c "$parts"
	say "$n shards: training"
	mems=$(printf 'SELECT peak_kb FROM memory_%s UNION ALL ' $(seq 0 $((n - 1))))
	# as many processes as cores: each shard's backend and its workers
	w=$(($(nproc) / n - 1)); [ "$w" -lt 0 ] && w=0
	read -r per_it peak loss < <(train sharded ratings "$w" "${mems% UNION ALL }")
	row "$n shards ($w workers each)" "$n" "$per_it" "$peak" "$loss"
done

CITUS=${SHARDS_CITUS:-$(q $COORD -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'citus'")}
if [ "$CITUS" = 1 ]; then
	CCOORD=$((COORD + 10))
	say "starting a Citus coordinator and $MAXN worker nodes"
	cluster ccoord $CCOORD citus
	for k in $(seq 0 $((MAXN - 1))); do
		cluster "cnode$k" $((CCOORD + 1 + k)) citus
	done
	for n in $COUNTS; do
		db=citus$n
		say "Citus on $n worker nodes: loading $DATA into a distributed table"
		for port in $CCOORD $(seq $((CCOORD + 1)) $((CCOORD + n))); do
			q "$port" -c "CREATE DATABASE $db"
			DB=$db q "$port" -c "CREATE EXTENSION citus"
		done
		nodes=$(for k in $(seq 0 $((n - 1))); do
			printf "SELECT citus_add_node('%s', %d);" "$RES" $((CCOORD + 1 + k)); done)
		DB=$db q $CCOORD -c "SELECT citus_set_coordinator_host('$RES', $CCOORD)" -c "$nodes" \
			-c "CREATE EXTENSION wals" \
			-c "CREATE TABLE ratings (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)" \
			-c "SELECT create_distributed_table('ratings', 'user_id')" \
			-c "\\copy ratings FROM '$CACHE/$DATA.csv' WITH (FORMAT csv)" -c "VACUUM ANALYZE ratings" >/dev/null
		say "Citus on $n worker nodes: training"
		w=$(($(nproc) / n - 1)); [ "$w" -lt 0 ] && w=0
		read -r per_it peak loss < <(DB=$db train citus ratings "$w" "SELECT NULL::bigint AS peak_kb" $CCOORD)
		row "Citus, $n nodes ($w workers each)" "$n" "$per_it" "$peak" "$loss"
	done
fi

OUT=$OUTDIR/shards.txt
{
	echo "wals sharded training benchmark, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(nproc) cores," \
		"kernels: $(q $COORD -c "SELECT kernels FROM wals_devices() WHERE device = 'cpu'")"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "data: $DATA ($users users, $items items), f = 64, CG 3 steps, 10 iterations;"
	echo "every server on this machine; each shard solves with nproc / shards - 1 parallel workers"
	echo
	column -t -s "$(printf '\t')" "$RES/results.tsv"
	echo
	echo "run time: $(($(date +%s) - START)) s"
} | tee "$OUT"
