#!/bin/bash
# The in-database half of catalog.sh: runs inside pg_virtualenv.
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

ITEMS=${CATALOG_ITEMS:-10000000}
USERS=${CATALOG_USERS:-100000}
FACTORS=${CATALOG_FACTORS:-64}
CHECK=${CATALOG_CHECK:-1}
TIMED=200
FIRST=20

say() { echo "  $*" >&2; }

sql "CREATE EXTENSION wals"
echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
echo "kernels: $(sql "SELECT kernels FROM wals_devices() WHERE device = 'cpu'")"
echo "$(sql 'SELECT version()' | cut -d, -f1); wals $(sql "SELECT extversion FROM pg_extension WHERE extname = 'wals'")"
echo "shared items in /dev/shm: $(awk '$2 == "/dev/shm" { print $4; exit }' /proc/mounts)"

say "making the ratings: $ITEMS items, $USERS users"
t0=$(date +%s.%N)
$PSQL -q <<SQL
CREATE UNLOGGED TABLE r (user_id bigint, item_id bigint);
INSERT INTO r
SELECT (hashint8(i * 2 + g) & 2147483647) % $USERS + 1, i
FROM generate_series(1, $ITEMS) i, generate_series(0, 1) g;
INSERT INTO r
SELECT u, (hashint8(u * 64 + g) & 2147483647) % greatest($ITEMS / 1000, 1) + 1
FROM generate_series(1, $USERS) u, generate_series(1, 50) g;
SQL
echo "ratings: $(sql 'SELECT count(*) FROM r'), made in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s"

say "training f = $FACTORS"
sql "SET client_min_messages = warning; SELECT 'trained: ' || users || ' users, ' || items || ' items, load ' || load_s || ' s, train ' || train_s || ' s, store ' || store_s || ' s' FROM wals_train('r', 'user_id', 'item_id', model => 'cat', factors => $FACTORS, iterations => 3, workers => 1)"

timed_calls() {
	$PSQL -At <<SQL
DO \$\$
DECLARE
  u bigint;
  t0 timestamptz;
  ms float8[] := '{}';
BEGIN
  FOR pass IN 1 .. 2 LOOP
    ms := '{}';
    FOR u IN SELECT user_id FROM cat_user_factors ORDER BY user_id LIMIT $TIMED LOOP
      t0 := clock_timestamp();
      PERFORM * FROM wals_recommend(u, 10, 'cat');
      ms := ms || 1000 * extract(epoch FROM clock_timestamp() - t0)::float8;
    END LOOP;
  END LOOP;
  RAISE NOTICE 'warm wals_recommend(user, 10), % users: p50 % ms, p99 % ms', $TIMED,
    round((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(ms) x)::numeric, 3),
    round((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY x) FROM unnest(ms) x)::numeric, 3);
END \$\$;
SQL
}

say "the first call, which builds the shared items"
t0=$(date +%s.%N)
sql "SELECT count(*) FROM wals_recommend(1, 10, 'cat')" > /dev/null
echo "the server's first call (builds the shared items): $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
timed_calls 2>&1 | sed 's/^NOTICE:  //'

say "first calls of new connections"
for i in $(seq 1 $FIRST); do
	$PSQL -At <<SQL
SET client_min_messages = notice;
DO \$\$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  PERFORM * FROM wals_recommend($i, 10, 'cat');
  RAISE NOTICE 'first %', 1000 * extract(epoch FROM clock_timestamp() - t0);
END \$\$;
SQL
done 2>&1 | awk '/first/ { print $NF }' | sort -g | awk '{ v[++n] = $1 } END {
	printf "first call of %d new connections: p50 %.2f ms, max %.2f ms\n", n, v[int((n + 1) / 2)], v[n] }'

say "checking $CHECK users against a plain SQL scan"
bad=0
for u in $(sql "SELECT user_id FROM cat_user_factors ORDER BY user_id LIMIT $CHECK"); do
	a=$(sql "SELECT string_agg(item_id::text, ',' ORDER BY score DESC, item_id) FROM wals_recommend($u, 10, 'cat', exclude_rated => false)")
	b=$(sql "SELECT string_agg(item_id::text, ',' ORDER BY s DESC, item_id) FROM (
	  SELECT i.item_id, (SELECT sum(x * y) FROM unnest(uf.factors, i.factors) t(x, y)) AS s
	  FROM cat_item_factors i, cat_user_factors uf WHERE uf.user_id = $u
	  ORDER BY s DESC, i.item_id LIMIT 10) q")
	[ "$a" = "$b" ] || { bad=$((bad + 1)); say "user $u: wals $a, SQL $b"; }
done
echo "top 10 equal to a plain SQL scan: $((CHECK - bad)) of $CHECK users"
