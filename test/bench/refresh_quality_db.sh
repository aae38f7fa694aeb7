#!/bin/bash
# The in-database half of refresh_quality.sh: runs inside pg_virtualenv with
# the ratings' path and their kind (ml100k: u.data, tab-separated with
# times; synthetic: a CSV of gen_ratings.py, times made here) as its
# arguments.
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/lib.sh
. "$BENCH/lib.sh"

data=$1
kind=$2
SEEDS=${REFRESH_SEEDS:-42 43 44 45 46}
MIN_RATING=${REFRESH_MIN_RATING:-4}
FACTORS=${REFRESH_FACTORS:-32}
REG=${REFRESH_REG:-20}
BATCHES=10
SETTINGS="factors => $FACTORS, iterations => 15, regularization => $REG, feedback => 'implicit',
	solver => 'cg', cg_steps => 3, device => 'cpu', workers => 0"

sql "CREATE EXTENSION wals"
echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
echo "kernels: $(sql "SELECT kernels FROM wals_devices() WHERE device = 'cpu'")"
echo "$(sql 'SELECT version()' | cut -d, -f1); wals $(sql "SELECT extversion FROM pg_extension WHERE extname = 'wals'")"

sql "CREATE TABLE raw (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL, ts bigint)"
case $kind in
ml100k)
	sql "\\copy raw FROM '$data' WITH (FORMAT text)"
	echo "data: MovieLens 100K ($data), replayed in the order of its timestamps"
	;;
*)
	sql "\\copy raw (user_id, item_id, rating) FROM '$data' WITH (FORMAT csv)"
	# times: a seeded shuffle of the rows
	sql "UPDATE raw SET ts = hashint8(user_id::bigint * 1000003 + item_id) & 2147483647"
	echo "data: SYNTHETIC, not MovieLens: gen_ratings.py --users 943 --items 1682 --nnz 100000" \
		"--explicit --seed 42, replayed in a seeded shuffle of its rows (set ML100K to replay MovieLens 100K)"
	;;
esac
$PSQL > /dev/null <<SQL
CREATE TABLE ev AS
	SELECT user_id, item_id, rating, ts, row_number() OVER (ORDER BY ts, user_id, item_id) AS seq
	FROM raw;
SELECT count(*) AS n FROM ev \gset
CREATE TABLE cut AS SELECT (:n * 0.8)::bigint AS train, (:n * 0.9)::bigint AS known;
-- the last 10%: the positive ratings of the users the first 90% knows
CREATE TABLE test AS
	SELECT user_id, item_id FROM ev
	WHERE seq > (SELECT known FROM cut) AND rating >= $MIN_RATING
	  AND user_id IN (SELECT user_id FROM ev WHERE seq <= (SELECT known FROM cut) AND rating >= $MIN_RATING);
ANALYZE test;
CREATE TABLE results (seed int, model text, metric text, value float8);
SQL
n=$(sql "SELECT count(*) FROM ev")
read -r train known < <(sql "SELECT train, known FROM cut" | tr '|' ' ')
step=$(( (known - train) / BATCHES ))
echo "$(printf "%'d" "$n") ratings, positive: rating >= $MIN_RATING, as implicit feedback (each pair 1);" \
	"training on seq <= $train, $BATCHES batches of $step, test: seq > $known," \
	"$(sql "SELECT count(*) FROM test") positive ratings of $(sql "SELECT count(DISTINCT user_id) FROM test") users known by then"
echo "new by the test: $(sql "SELECT count(DISTINCT user_id) FROM ev WHERE seq > $train AND seq <= $known AND rating >= $MIN_RATING
	AND user_id NOT IN (SELECT user_id FROM ev WHERE seq <= $train AND rating >= $MIN_RATING)") users," \
	"$(sql "SELECT count(DISTINCT item_id) FROM ev WHERE seq > $train AND seq <= $known AND rating >= $MIN_RATING
	AND item_id NOT IN (SELECT item_id FROM ev WHERE seq <= $train AND rating >= $MIN_RATING)") items"
echo "settings: ${SETTINGS//[$'\t\n']/ }"

# score SEED MODEL: wals_evaluate of MODEL into results
score() {
	sql "INSERT INTO results SELECT $1, '$2', metric, value
		FROM wals_evaluate('$2', 'test', 'user_id', 'item_id', k => 10)" > /dev/null
}

for seed in $SEEDS; do
	echo "seed $seed: replaying" >&2
	$PSQL > /dev/null <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS src;
CREATE TABLE src (user_id int NOT NULL, item_id int NOT NULL, seq bigint NOT NULL);
INSERT INTO src SELECT user_id, item_id, seq FROM ev WHERE seq <= $train AND rating >= $MIN_RATING;
CREATE INDEX ON src (seq);
CREATE INDEX ON src (user_id, item_id);
CREATE INDEX ON src (item_id);
ANALYZE src;
SELECT 1 FROM wals_train('src', 'user_id', 'item_id', model => 'stale', $SETTINGS, seed => $seed,
	changed_col => 'seq');
SELECT 1 FROM wals_train('src', 'user_id', 'item_id', model => 'new', $SETTINGS, seed => $seed,
	changed_col => 'seq');
SELECT 1 FROM wals_train('src', 'user_id', 'item_id', model => 'changed', $SETTINGS, seed => $seed,
	changed_col => 'seq');
SELECT 1 FROM wals_train('src', 'user_id', 'item_id', model => 'touched', $SETTINGS, seed => $seed,
	changed_col => 'seq');
SQL
	for b in $(seq 1 $BATCHES); do
		lo=$(( train + (b - 1) * step ))
		hi=$(( b == BATCHES ? known : train + b * step ))
		sql "INSERT INTO src SELECT user_id, item_id, seq FROM ev
			WHERE seq > $lo AND seq <= $hi AND rating >= $MIN_RATING" > /dev/null
		$PSQL > /dev/null <<SQL
WITH x AS (SELECT * FROM wals_refresh('new', solve_items => 'new'))
INSERT INTO results SELECT $seed, 'new', k, v
	FROM x, LATERAL (VALUES ('refresh_s', x.refresh_s), ('refreshed_ratings', x.ratings::float8)) t(k, v);
WITH x AS (SELECT * FROM wals_refresh('changed', solve_items => 'changed'))
INSERT INTO results SELECT $seed, 'changed', k, v
	FROM x, LATERAL (VALUES ('refresh_s', x.refresh_s), ('refreshed_ratings', x.ratings::float8)) t(k, v);
WITH x AS (SELECT * FROM wals_refresh('touched', solve_items => 'touched'))
INSERT INTO results SELECT $seed, 'touched', k, v
	FROM x, LATERAL (VALUES ('refresh_s', x.refresh_s), ('refreshed_ratings', x.ratings::float8)) t(k, v);
SQL
	done
	sql "SET client_min_messages = warning;
		SELECT 1 FROM wals_train('src', 'user_id', 'item_id', model => 'retrained', $SETTINGS,
			seed => $seed)" > /dev/null
	for m in stale new changed touched retrained; do
		score "$seed" "$m"
		sql "SELECT wals_drop_model('$m')" > /dev/null
	done
done

echo
echo "recall@10 and ndcg@10 on the last 10% (means over seeds $SEEDS; against the retrained model's):"
$PSQL -At -F ' | ' <<SQL
WITH m AS (
	SELECT model, metric, avg(value) AS v FROM results GROUP BY model, metric),
r AS (SELECT metric, v FROM m WHERE model = 'retrained')
SELECT format('| %s | %s (%s) | %s (%s) | %s users, %s unknown | %s |',
	CASE model WHEN 'stale' THEN 'trained on 80%, not refreshed'
		WHEN 'new' THEN 'on 80% + 10 refreshes, solve_items => ''new'''
		WHEN 'changed' THEN 'on 80% + 10 refreshes, solve_items => ''changed'''
		WHEN 'touched' THEN 'on 80% + 10 refreshes, solve_items => ''touched'''
		ELSE 'retrained on 90%' END,
	round(max(m.v) FILTER (WHERE m.metric = 'recall@10')::numeric, 4),
	to_char(100 * (max(m.v) FILTER (WHERE m.metric = 'recall@10') / max(r.v) FILTER (WHERE r.metric = 'recall@10') - 1), 'FMSG990.0') || '%',
	round(max(m.v) FILTER (WHERE m.metric = 'ndcg@10')::numeric, 4),
	to_char(100 * (max(m.v) FILTER (WHERE m.metric = 'ndcg@10') / max(r.v) FILTER (WHERE r.metric = 'ndcg@10') - 1), 'FMSG990.0') || '%',
	round(max(m.v) FILTER (WHERE m.metric = 'users')), round(max(m.v) FILTER (WHERE m.metric = 'users_unknown')),
	coalesce(round((SELECT sum(value) FROM results x WHERE x.model = m.model AND x.metric = 'refresh_s')::numeric
		/ (SELECT count(DISTINCT seed) FROM results), 3) || ' s for the 10 refreshes', ''))
FROM m JOIN r USING (metric)
GROUP BY model ORDER BY array_position(ARRAY['stale', 'new', 'changed', 'touched', 'retrained'], model);
SQL
echo
echo "each seed, recall@10 / ndcg@10:"
$PSQL -At <<SQL
SELECT format('  seed %s: %s', seed, string_agg(format('%s %s / %s', model,
		round(recall::numeric, 4), round(ndcg::numeric, 4)), ', '
		ORDER BY array_position(ARRAY['stale', 'new', 'changed', 'touched', 'retrained'], model)))
FROM (SELECT seed, model, max(value) FILTER (WHERE metric = 'recall@10') AS recall,
		max(value) FILTER (WHERE metric = 'ndcg@10') AS ndcg
	FROM results GROUP BY seed, model) s
GROUP BY seed ORDER BY seed;
SQL
