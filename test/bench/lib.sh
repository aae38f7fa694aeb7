# shellcheck shell=sh
# Sourced by the benchmarks (quality.sh, train.sh and their in-database
# halves), so that they generate their data and score their models in one
# way.  POSIX sh: quality_db.sh runs under sh.

# WALS_PYTHON: another python3 with numpy and scipy (a machine whose own
# python3 has neither, and no Debian packages to install them from).
PY=${WALS_PYTHON:-/usr/bin/python3}
PSQL="psql -X -q -v ON_ERROR_STOP=1"

# The server the benchmarks run on: PG_CONFIG's (make passes its own), and
# a throwaway cluster of it (test/lib.sh), which the host-side scripts
# start from the repository's root; the in-database halves, which run
# inside it from elsewhere, set BENCH to this folder first.
# shellcheck source=test/lib.sh
. "${BENCH:-test/bench}/../lib.sh"

# --- host side: needs CACHE, TOOLS, SEED and a say function ------------------

# need_python: numpy and scipy for the tools, installed when missing (as
# root, by test/install_deps.sh --bench, which make's bench targets have
# run already).
need_python() {
	$PY -c 'import numpy, scipy' 2>/dev/null && return 0
	"$ROOT/test/install_deps.sh" --bench || exit 1
}

# bench_prepare TOOL...: run from the repository's root, sets the paths every
# benchmark uses (ROOT, BENCH, CACHE, OUTDIR, TOOLS: WALS_TOOLS or
# ../shared/tools) and SEED, then checks what they need before their data:
# numpy and scipy, the TOOLs (gen_ratings.py, ...), pg_virtualenv, and the
# cache and output folders.
bench_prepare() {
	ROOT=$(pwd)
	BENCH=$ROOT/test/bench
	CACHE=$BENCH/cache
	OUTDIR=$BENCH/out
	TOOLS=${WALS_TOOLS:-$ROOT/../shared/tools}
	SEED=42
	need_python
	for tool in "$@"; do
		if [ ! -f "$TOOLS/$tool" ]; then
			say "$TOOLS/$tool not found (set WALS_TOOLS)"
			exit 1
		fi
	done
	case $PG_VIRTUALENV in
	pg_virtualenv*) command -v pg_virtualenv >/dev/null ||
		{ say "pg_virtualenv not found (postgresql-common)"; exit 1; } ;;
	esac
	mkdir -p "$CACHE" "$OUTDIR"
}

# gen_20m: the data set of the training benchmarks, at MovieLens-20M size,
# generated once into the cache; sets DATA to its name and
# DATA_ARGS to the arguments that made it.
gen_20m() {
	DATA_ARGS="--users 138000 --items 27000 --nnz 20000000 --test-fraction 0.02"
	DATA=implicit-u138000-i27000-n20000000-s$SEED
	# shellcheck disable=SC2086  # DATA_ARGS is a list of arguments
	gen "$DATA" $DATA_ARGS
}

# gen_gowalla: the set at the shape of the public implicit benchmark the
# issues cite (about 30,000 users, 41,000 items, 1M interactions, a fifth of
# each user's held out), generated once into the cache; sets DATA.
gen_gowalla() {
	DATA=implicit-u29858-i40981-n1030000-s$SEED
	gen "$DATA" --users 29858 --items 40981 --nnz 1030000 --test-fraction 0.2
}

# abspath FILE: FILE's path from the root, for a script that changes folder.
abspath() {
	echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
}

# gen NAME ARGS...: CACHE/NAME.csv (and NAME.test.csv with --test-fraction),
# generated once; written under a temporary name and renamed when complete,
# so that an interrupted run never leaves a truncated file to be reused.
gen() {
	name=$1
	shift
	[ -f "$CACHE/$name.csv" ] && return 0
	say "generating $name"
	tmp=$CACHE/tmp-$$-$name
	$PY "$TOOLS/gen_ratings.py" "$@" --seed "$SEED" --out "$tmp.csv"
	if [ -f "$tmp.test.csv" ]; then
		mv "$tmp.test.csv" "$CACHE/$name.test.csv"
	fi
	mv "$tmp.csv" "$CACHE/$name.csv"
}

# --- database side: inside pg_virtualenv (PGHOST, PGPORT, ...) ---------------

sql() { $PSQL -At -c "$1"; }

# kernel_families: the families of kernels this CPU runs, widest first, as
# wals.kernels names them (a SET the CPU cannot run fails once the library
# is loaded).
kernel_families() {
	for family in avx512 avx2 neon generic; do
		if $PSQL -c "SELECT 1 FROM wals_devices() LIMIT 0" -c "SET wals.kernels = '$family'" \
			> /dev/null 2>&1; then
			printf '%s ' "$family"
		fi
	done
}

# load TABLE FILE: a headerless user_id,item_id,rating CSV, indexed by user
# (serving with exclude_rated looks up the user's rows).
load() {
	$PSQL <<EOF
CREATE TABLE $1 (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL);
\copy $1 FROM '$2' WITH (FORMAT csv)
CREATE INDEX ON $1 (user_id);
ANALYZE $1;
EOF
}

# load_file TABLE FILE: like load, from a CSV of the user's own that may
# hold two columns (user_id,item_id: every rating 1) or three.
load_file() {
	if [ "$(head -1 "$2" | awk -F, '{ print NF }')" -ge 3 ]; then
		load "$1" "$2"
		return
	fi
	$PSQL <<EOF
CREATE TABLE $1 (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL DEFAULT 1);
\copy $1 (user_id, item_id) FROM '$2' WITH (FORMAT csv)
CREATE INDEX ON $1 (user_id);
ANALYZE $1;
EOF
}

# known PREFIX: the test rows of PREFIX_test whose user and item occur in
# PREFIX_ratings, as PREFIX_known.
known() {
	$PSQL <<EOF
CREATE TABLE $1_known AS
	SELECT t.user_id, t.item_id, t.rating FROM $1_test t
	WHERE t.user_id IN (SELECT user_id FROM $1_ratings)
	  AND t.item_id IN (SELECT item_id FROM $1_ratings);
CREATE INDEX ON $1_known (user_id, item_id);
ANALYZE $1_known;
EOF
}

# ranking_json MODEL PREFIX DEFINITION [USER_CONDITION]: one JSON line with
# precision@10, ndcg@10, test_users, hits and relevant (the sums behind
# precision@10, so that the parts of a split run add up) of MODEL on the
# held-out split of PREFIX, over the test users that satisfy USER_CONDITION
# (on user_id; default all), so that a caller can score disjoint sets of
# users in concurrent sessions.  DEFINITION is printed back in the line.
#
# Common to both definitions:
#   - recommendations: wals_recommend(user, 10, model, exclude_rated => true),
#     ranked in the order the function returns them (WITH ORDINALITY), so a
#     held-out item the user also has in training counts as relevant but can
#     never be a hit;
#   - relevant items: the user's distinct held-out items, duplicate test
#     rows counting once; m = min(10, |relevant|);
#   - ndcg@10 = sum over hits of 1/log2(rank + 1), divided by the same sum
#     over ranks 1 .. m, averaged over the test users.
#
# DEFINITION ref_wals, that of ref_wals.py, which quality.sh compares with:
#   - test rows: PREFIX_known (ref_wals.py drops the rows whose user or item
#     is not in training); a test user is one with at least one such row;
#   - precision@10 = hits / m, averaged over the test users (macro).
#
# DEFINITION implicit, that of implicit.evaluation.ranking_metrics_at_k
# (implicit 0.7.3), behind the peer figures of doc/performance.md (Targets):
#   - test rows: all of PREFIX_test, a test user being one with at least one
#     (implicit's test matrix spans the ids of the whole data set, so a user
#     or item that training lacks stays in the denominators: wals recommends
#     nothing to an unknown user, implicit ranks items by its zero factors,
#     a hit by chance at most);
#   - precision@10 = sum of hits over the test users / sum of m (micro: a
#     user with more held-out items weighs more), whereas its ndcg@10 is the
#     mean over users above.
ranking_json() {
	case $3 in
	ref_wals) test_rows=$2_known precision="avg(p.hits::float8 / p.m)" ;;
	implicit) test_rows=$2_test precision="sum(p.hits)::float8 / sum(p.m)" ;;
	*) echo "ranking_json: unknown definition $3" >&2; return 1 ;;
	esac
	sql "WITH rel AS (
			SELECT user_id, count(DISTINCT item_id) AS n FROM $test_rows
			WHERE ${4:-true} GROUP BY user_id),
		ideal AS (
			SELECT n, sum(1.0 / log(2.0, j + 1.0))::float8 AS idcg
			FROM generate_series(1, 10) n, generate_series(1, n) j GROUP BY n),
		per_user AS (
			SELECT rel.user_id, least(rel.n, 10) AS m,
				count(k.item_id) AS hits,
				coalesce(sum(1.0 / log(2.0, r.rank + 1.0)) FILTER (WHERE k.item_id IS NOT NULL), 0)::float8 AS dcg
			FROM rel
			LEFT JOIN LATERAL wals_recommend(rel.user_id, 10, '$1', exclude_rated => true)
				WITH ORDINALITY AS r(item_id, score, rank) ON true
			LEFT JOIN (SELECT DISTINCT user_id, item_id FROM $test_rows) k
				ON k.user_id = rel.user_id AND k.item_id = r.item_id
			GROUP BY rel.user_id, rel.n)
		SELECT json_build_object(
			'definition', '$3',
			'precision@10', $precision,
			'ndcg@10', avg(p.dcg / i.idcg),
			'test_users', count(*),
			'hits', sum(p.hits),
			'relevant', sum(p.m))
		FROM per_user p JOIN ideal i ON i.n = p.m"
}
