#!/bin/bash
# Loading a sharded source: the same ratings loaded straight into two
# postgres_fdw shards by the recipe's own files
# (examples/postgres_fdw/3_load_shard1.sql and 3_load_shard2.sql, each
# shard taking the rows of its range from the whole file), one shard after
# the other and both at once, against loading them through the
# coordinator's partitioned table: COPY, and INSERT ... SELECT from a local
# table with postgres_fdw's batch_size at 1 (its default) and at 1000.
# The tables are the recipe's (examples/postgres_fdw/1_shard.sql and
# 2_coordinator.sql), on servers of this machine reached over their Unix
# sockets, so that the difference is the work of each way, not a network's.
# Prints the seconds of each way, the median of LOAD_RUNS runs.
#
#   ./test/bench/shard_load.sh   (from the repository's root, as root;
#                                 or make bench-shard-load)
#   LOAD_ROWS=150000             ratings (15 per user), 150,000 by default
#   LOAD_RUNS=3                  runs of each way
# The report goes to test/bench/out/shard_load.txt.  wals is not needed.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROWS=${LOAD_ROWS:-150000}
RUNS=${LOAD_RUNS:-3}
OUTDIR=$(pwd)/test/bench/out
mkdir -p "$OUTDIR"

say() { echo "shard_load.sh: $*" >&2; }

PG_CONFIG=${PG_CONFIG:-pg_config}
BIN=$("$PG_CONFIG" --bindir)
RES=$(mktemp -d -t wals-shard-load.XXXXXX)
chown postgres "$RES"
as_pg() { runuser -u postgres -- "$@"; }
q() {
	port=$1
	shift
	as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$RES" -p "$port" -d app -At "$@"
}
stop_all() {
	for d in "$RES"/*/; do
		[ -f "$d/postmaster.pid" ] && as_pg "$BIN/pg_ctl" -D "$d" -m fast stop >/dev/null 2>&1
	done
	rm -rf "$RES"
}
trap stop_all EXIT

# cluster NAME PORT: a new server in RES, listening on its socket there,
# with a database app
cluster() {
	as_pg "$BIN/initdb" -D "$RES/$1" -A trust >/dev/null
	cat >>"$RES/$1/postgresql.conf" <<EOF
port = $2
listen_addresses = ''
unix_socket_directories = '$RES'
EOF
	as_pg "$BIN/pg_ctl" -D "$RES/$1" -l "$RES/$1.log" -w start >/dev/null
	as_pg psql -X -q -h "$RES" -p "$2" -d postgres -c 'CREATE DATABASE app'
}

COORD=55500
SHARD1=55501
SHARD2=55502
say "starting a coordinator and two shard servers in $RES"
cluster coord $COORD
cluster shard1 $SHARD1
cluster shard2 $SHARD2
TABLE="CREATE TABLE ratings_part (user_id bigint NOT NULL, item_id bigint NOT NULL, rating real NOT NULL)"
q $SHARD1 -c "$TABLE"
q $SHARD2 -c "$TABLE"
# The recipe's partitioned table; this superuser's own mappings, which
# need no password, to load through it.
q $COORD -c "CREATE EXTENSION postgres_fdw" -c "CREATE SCHEMA shop" -c "
CREATE SERVER shard1 FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host '$RES', port '$SHARD1', dbname 'app');
CREATE SERVER shard2 FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host '$RES', port '$SHARD2', dbname 'app');
CREATE USER MAPPING FOR CURRENT_USER SERVER shard1;
CREATE USER MAPPING FOR CURRENT_USER SERVER shard2;
CREATE TABLE shop.ratings (user_id bigint NOT NULL, item_id bigint NOT NULL, rating real NOT NULL)
  PARTITION BY RANGE (user_id);
CREATE FOREIGN TABLE shop.ratings_1 PARTITION OF shop.ratings
  FOR VALUES FROM (MINVALUE) TO (1000000) SERVER shard1
  OPTIONS (schema_name 'public', table_name 'ratings_part');
CREATE FOREIGN TABLE shop.ratings_2 PARTITION OF shop.ratings
  FOR VALUES FROM (1000000) TO (MAXVALUE) SERVER shard2
  OPTIONS (schema_name 'public', table_name 'ratings_part');"

# The ratings as a CSV file and as a local table of the coordinator: the
# odd users' ids from 1000000 up, on shard 2, the even ones' on shard 1.
CSV=$RES/ratings.csv
q $COORD -c "CREATE TABLE staged AS
  SELECT CASE WHEN u % 2 = 1 THEN 1000000 + u ELSE u END::bigint AS user_id,
         ((u * 7 + g * 13) % 5000 + 1)::bigint AS item_id, (1 + (u + g) % 5)::real AS rating
  FROM generate_series(1, $ROWS / 15) u, generate_series(1, 15) g" \
	-c "\\copy staged TO '$CSV' WITH (FORMAT csv)"
rows=$(q $COORD -c "SELECT count(*) FROM staged")

# now: seconds since the epoch, to the nanosecond
now() { date +%s.%N; }
empty() {
	q $SHARD1 -c "TRUNCATE ratings_part"
	q $SHARD2 -c "TRUNCATE ratings_part"
}
loaded() {
	n=$(q $COORD -c "SELECT count(*) FROM shop.ratings")
	[ "$n" = "$rows" ] || { say "$1 loaded $n rows of $rows"; exit 1; }
}
load_shard() { q "$1" -f "examples/postgres_fdw/3_load_shard$2.sql" <"$CSV"; }

straight_one_by_one() {
	load_shard $SHARD1 1
	load_shard $SHARD2 2
}
straight_at_once() {
	load_shard $SHARD1 1 &
	p1=$!
	load_shard $SHARD2 2 &
	p2=$!
	wait $p1
	wait $p2
}
parent_copy() { q $COORD -c "\\copy shop.ratings FROM '$CSV' WITH (FORMAT csv)"; }
batch() {
	for s in shard1 shard2; do
		q $COORD -c "ALTER SERVER $s OPTIONS (${2:-SET} batch_size '$1')"
	done
}
parent_insert() { q $COORD -c "INSERT INTO shop.ratings SELECT * FROM staged"; }
parent_insert_batched() { parent_insert; }

printf 'way\tseconds (median of %s)\trows a second\n' "$RUNS" >"$RES/results.tsv"
for way in straight_one_by_one straight_at_once parent_copy parent_insert parent_insert_batched; do
	case $way in
		parent_insert) batch 1 ADD ;;
		parent_insert_batched) batch 1000 ;;
	esac
	times=""
	for _ in $(seq "$RUNS"); do
		empty
		t0=$(now)
		$way
		t1=$(now)
		loaded $way
		times="$times $(echo "$t1 - $t0" | bc)"
	done
	median=$(printf '%s\n' $times | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
	say "$way: $times s"
	printf '%s\t%.2f\t%.0f\n' "$way" "$median" "$(echo "$rows / $median" | bc -l)" >>"$RES/results.tsv"
done

OUT=$OUTDIR/shard_load.txt
{
	echo "wals sharded source loading benchmark, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(nproc) cores;" \
		"$("$BIN/postgres" --version)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "data: $rows ratings, a CSV file of $(stat -c %s "$CSV") bytes; a coordinator and two"
	echo "shards on this machine, over Unix sockets"
	echo
	column -t -s "$(printf '\t')" "$RES/results.tsv"
} | tee "$OUT"
