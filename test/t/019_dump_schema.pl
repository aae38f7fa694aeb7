
# A dump of one schema keeps its models.  pg_dump -n (or -t) dumps a
# model's factor tables, with the description of its settings that every
# training writes on them, but not its catalog row, which belongs to the
# extension: after a restore into a fresh database the tables are there and
# the model is not, and the errors that meet it say how to attach it.
# wals_attach_model, called by the owner of the tables, makes the model
# again: it serves exactly what it served (recommendations, fold-in,
# predictions), its settings are those it was trained with, and it
# retrains in place.  The other schema's model stays behind.  Then a
# hostile ordinary role tries to attach another role's tables, and tables
# of its own whose description is whatever it wrote: every try ends in a
# clean error naming what is wrong, never a crash or an internal error.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "client_min_messages = warning\n");
$node->start;
my $start_time = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

$node->safe_psql(
	'postgres', q{
CREATE ROLE analyst LOGIN;
CREATE ROLE mallory LOGIN;
CREATE DATABASE src;
});
$node->safe_psql(
	'src', q{
CREATE EXTENSION wals;
CREATE SCHEMA shop AUTHORIZATION analyst;
CREATE SCHEMA other AUTHORIZATION analyst;
SET ROLE analyst;
CREATE TABLE shop.ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 300 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 1500) u, generate_series(1, 15) g;
CREATE TABLE other.clicks AS
  SELECT u AS user_id, (u * 11 + g * 3) % 200 + 1 AS item_id
  FROM generate_series(1, 800) u, generate_series(1, 10) g;
-- most settings away from their defaults, so that each must travel
SELECT 1 FROM wals_train('shop.ratings', 'user_id', 'item_id', 'rating', model => 'shop.ratings',
  factors => 8, iterations => 5, regularization => 0.07, alpha => 2.5, unobserved_weight => 0.5,
  solver => 'subspace', block_size => 4, seed => 7, tolerance => 0.0001, accelerate => 'ncg',
  regularization_exponent => 0.3, init_std => 0.5, validation => 0.2, patience => 3,
  validation_metric => 'recall@10');
SELECT 1 FROM wals_train('other.clicks', 'user_id', 'item_id', model => 'other.clicks',
  factors => 4, iterations => 3);
});

my $description = q{SELECT col_description('shop.ratings_user_factors'::regclass,
  (SELECT attnum FROM pg_attribute WHERE attrelid = 'shop.ratings_user_factors'::regclass
   AND attname = 'factors'))};
like($node->safe_psql('src', $description), qr/^wals model settings: \{"format": 3, "source": "shop.ratings",/,
	'a training describes the model on its user factor table');

# A comment of the owner's own on that column is never overwritten.
$node->safe_psql('src', q{SET ROLE analyst;
COMMENT ON COLUMN other.clicks_user_factors.factors IS 'the clicks, as the model sees them';
SELECT 1 FROM wals_train('other.clicks', 'user_id', 'item_id', model => 'other.clicks',
  factors => 4, iterations => 2);});
is( $node->safe_psql('src', q{SELECT col_description('other.clicks_user_factors'::regclass, 2)}),
	'the clicks, as the model sees them',
	'a retraining leaves the owner\'s own comment on column "factors" as it is');

# Everything the model serves, and its settings.
my %queries = (
	'settings' => q{
SELECT source::text, user_col, item_col, rating_col, feedback, factors, iterations, max_iterations,
       regularization, alpha, unobserved_weight, solver, cg_steps, seed, tolerance, warm_start,
       users, items, ratings, loss, device, workers, load_s, train_s, store_s, total_s,
       owner::text, trained_by, accelerate, block_size, regularization_exponent, init_std,
       validation, validation_table, validation_metric, patience, best_iteration,
       validation_score, trained_at
FROM wals_models WHERE schema = 'shop' AND model = 'ratings'},
	'recommendations' => q{
SELECT u, r.ord, r.item_id, r.score
FROM generate_series(1, 15) u,
     LATERAL wals_recommend(u, 5, 'shop.ratings') WITH ORDINALITY r(item_id, score, ord)
ORDER BY u, r.ord},
	'fold-in' => q{
SELECT s, r.ord, r.item_id, r.score
FROM generate_series(1, 4) s,
     LATERAL wals_recommend_items(ARRAY[s, s + 10, s + 50]::bigint[], ARRAY[5, 3, 1]::real[], 5,
                                  'shop.ratings') WITH ORDINALITY r(item_id, score, ord)
ORDER BY s, r.ord},
	'predictions' => q{
SELECT u, i, wals_predict(u, i, 'shop.ratings')
FROM generate_series(1, 9) u, generate_series(1, 300, 37) i ORDER BY u, i},
	'rated items' => q{SELECT * FROM wals_rated_items(3, 'shop.ratings')},);

sub snapshot
{
	my ($db) = @_;
	my %s;
	$s{$_} = $node->safe_psql($db, "SET ROLE analyst; $queries{$_}") for keys %queries;
	return \%s;
}
my $before = snapshot('src');
like($before->{'recommendations'}, qr/^1\|1\|\d+\|/, 'the model serves in its database');
like($before->{'settings'}, qr/^shop\.ratings\|user_id\|item_id\|rating\|implicit\|8\|/,
	'with the settings it was trained with');

# Dump schema shop alone, and restore it into a fresh database.
my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-n', 'shop', '-Fc', '-f', "$tmp/shop.dump", '-d', 'src' ],
	'pg_dump -n shop');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
$node->safe_psql('dst', 'CREATE EXTENSION wals');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'dst', "$tmp/shop.dump" ],
	'pg_restore into a fresh database');
is($node->safe_psql('dst', q{SELECT count(*) FROM wals_models}), '0',
	'the restored schema holds the factor tables, and no model');

sub as_role
{
	my ($db, $role, $sql) = @_;
	return $node->psql($db, "SET ROLE $role;\n\\set VERBOSITY verbose\n$sql", on_error_stop => 0);
}

# Every way of meeting the missing model says how to attach it.
my $hint = qr/attach them with SELECT wals_attach_model\('shop\.ratings'\)/;
for my $sql (
	q{SELECT * FROM wals_recommend(1, 5, 'shop.ratings')},
	q{SET search_path = shop, public; SELECT * FROM wals_recommend(1, 5, 'ratings')},
	q{SET search_path = shop, public; SELECT * FROM wals_recommend(1, 5)},
	q{SELECT * FROM wals_train('shop.ratings', 'user_id', 'item_id', 'rating', model => 'shop.ratings',
	  factors => 8, iterations => 2, warm_start => true)})
{
	my ($ret, $out, $err) = as_role('dst', 'analyst', $sql);
	like($err, $hint, "the error says how to attach the model: $sql");
}

# A role that does not own the tables cannot attach them, with USAGE on
# the schema or without.
my ($ret, $out, $err) = as_role('dst', 'mallory', q{SELECT wals_attach_model('shop.ratings')});
like($err, qr/42501: permission denied for schema shop/, 'mallory, without USAGE on shop, is refused');
$node->safe_psql('dst', 'GRANT USAGE, CREATE ON SCHEMA shop TO mallory');
($ret, $out, $err) = as_role('dst', 'mallory', q{SELECT wals_attach_model('shop.ratings')});
like($err, qr/42501: must be owner of the factor tables of model "shop.ratings"/,
	'mallory, with USAGE and CREATE on shop, is refused the tables of analyst');
is($node->safe_psql('dst', q{SELECT count(*) FROM wals_models}), '0', 'and nothing is attached');

# The owner attaches the model.
($ret, $out, $err) = as_role('dst', 'analyst',
	q{SET client_min_messages = notice; SELECT wals_attach_model('shop.ratings')});
is($ret, 0, 'the owner of the tables attaches the model') or diag($err);
like($err, qr/model "shop.ratings" is attached: 1500 users, 300 items, 8 factors/,
	'with a NOTICE saying what it attached');
my $after = snapshot('dst');
for my $what (sort keys %queries)
{
	is($after->{$what}, $before->{$what}, "the attached model: $what identical");
}
is( $node->safe_psql('dst',
		q{SELECT user_factors::oid = 'shop.ratings_user_factors'::regclass::oid
		     AND item_factors::oid = 'shop.ratings_item_factors'::regclass::oid
		     AND version > 0 FROM wals_models}),
	't', 'the catalog row names the restored tables, with a version of this database');
is($node->safe_psql('dst', q{SELECT count(*) FROM wals_training_log}), '0',
	'its training log starts empty');
is( $node->safe_psql('dst',
		q{SELECT count(*) FROM wals_models WHERE schema = 'other'}
		  . q{ UNION ALL SELECT count(*) FROM pg_namespace WHERE nspname = 'other'}),
	"0\n0", 'the model of the schema not dumped is not there');
($ret, $out, $err) = as_role('dst', 'analyst', q{SELECT wals_attach_model('shop.ratings')});
like($err, qr/42710: model "shop.ratings" already exists/, 'a model is attached once');

# It retrains in place, from its factors.
my $tables = q{SELECT user_factors::oid || ',' || item_factors::oid || ',' || version FROM wals_models};
my ($u, $i, $v) = split /,/, $node->safe_psql('dst', $tables);
($ret, $out, $err) = as_role('dst', 'analyst',
	q{SELECT iterations FROM wals_train('shop.ratings', 'user_id', 'item_id', 'rating',
	  model => 'shop.ratings', factors => 8, iterations => 2, warm_start => true,
	  solver => 'subspace', block_size => 4)});
is($ret, 0, 'the attached model retrains, warm-started') or diag($err);
my ($u2, $i2, $v2) = split /,/, $node->safe_psql('dst', $tables);
ok($u2 == $u && $i2 == $i && $v2 > $v, 'in the same tables, as a new version');
like($node->safe_psql('dst', $description), qr/"max_iterations": 2, .*"warm_start": true/,
	'and the description follows the retraining');
like($node->safe_psql('dst', "SET ROLE analyst; $queries{recommendations}"), qr/^1\|1\|\d+\|/,
	'and serves');

# A dump of the tables alone (-t), attached by an unqualified name.
$node->command_ok(
	[
		'pg_dump', '-t', 'shop.ratings_*_factors', '-Fp', '-f', "$tmp/tables.sql",
		'-d', 'src'
	],
	'pg_dump -t of the factor tables');
$node->safe_psql('postgres', 'CREATE DATABASE dst2');
$node->safe_psql('dst2',
	'CREATE EXTENSION wals; CREATE SCHEMA shop AUTHORIZATION analyst');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'dst2', '-f', "$tmp/tables.sql" ],
	'restored into another fresh database');
($ret, $out, $err) = as_role('dst2', 'analyst',
	q{SET client_min_messages = notice; SET search_path = shop, public;
	  SELECT wals_attach_model('ratings')});
is($ret, 0, 'the tables are attached by the name of their model along search_path') or diag($err);
like($err, qr/model "shop.ratings" is attached without a source.*does not exist here/s,
	'without their source, which was not dumped, with a NOTICE');
is( $node->safe_psql('dst2', q{SELECT source IS NULL FROM wals_models}), 't',
	'the catalog records no source');
is($node->safe_psql('dst2', "SET ROLE analyst; $queries{recommendations}"),
	$before->{recommendations}, 'and the model serves as it did');
($ret, $out, $err) = as_role('dst2', 'analyst',
	q{SELECT wals_refresh_users('{1}', 'shop.ratings')});
like($err, qr/42P01: model "shop.ratings" has no source/,
	'wals_refresh_users, which needs the source, is refused cleanly');
unlike($err, qr/XX000/, 'with no internal error');

# ---------------------------------------------------------------------------
# Hostile: mallory makes factor tables of her own in the form wals makes (a
# copy of a model of hers) and writes any description on them.
$node->safe_psql(
	'dst', q{
CREATE SCHEMA mallory AUTHORIZATION mallory;
CREATE TABLE public.secret_ratings (user_id int, item_id int, rating real);
INSERT INTO public.secret_ratings VALUES (1, 1, 1);
SET ROLE mallory;
CREATE TABLE mallory.r AS
  SELECT u AS user_id, (u * 7 + g) % 30 + 1 AS item_id FROM generate_series(1, 60) u, generate_series(1, 5) g;
SELECT 1 FROM wals_train('mallory.r', 'user_id', 'item_id', model => 'mallory.m',
  factors => 4, iterations => 2);
CREATE TABLE mallory.h_user_factors (LIKE mallory.m_user_factors INCLUDING ALL);
CREATE TABLE mallory.h_item_factors (LIKE mallory.m_item_factors INCLUDING ALL);
INSERT INTO mallory.h_user_factors SELECT * FROM mallory.m_user_factors;
INSERT INTO mallory.h_item_factors SELECT * FROM mallory.m_item_factors;
CREATE TABLE mallory.base AS
  SELECT substr(col_description('mallory.m_user_factors'::regclass, 2), 22)::jsonb AS d;
});

# The comment of a description made by SQL expression $expr over the
# description d of mallory.m (jsonb), or of a text.
sub desc_of
{
	my ($expr) = @_;
	return "'wals model settings: ' || ($expr)::text";
}

# Set the comment on mallory.h's factors to what SQL expression $expr
# (over d) makes, as mallory.
sub describe_h
{
	my ($expr) = @_;
	$node->safe_psql(
		'dst', qq{SET ROLE mallory;
DO \$\$ BEGIN
  EXECUTE format('COMMENT ON COLUMN mallory.h_user_factors.factors IS %L',
                 (SELECT ($expr)::text FROM mallory.base));
END \$\$;});
}

sub attach_h
{
	my ($name, $expr, $expected) = @_;
	describe_h($expr);
	my ($ret, $out, $err) = as_role('dst', 'mallory', q{SELECT wals_attach_model('mallory.h')});
	like($err, $expected, "$name: refused");
	unlike($err, qr/XX\d\d\d|server closed|connection to server was lost/,
		"$name: with no internal error") or diag($err);
}

my @hostile = (
	[ 'factors as a string', q{jsonb_set(d, '{factors}', '"4"')}, qr/22023: invalid description of model "mallory.h": "factors" must be a number/ ],
	[ 'a huge number of factors', q{jsonb_set(d, '{factors}', '1e300')}, qr/"factors" is 10000000000.*\.\.\., and must be between 1 and 4096/ ],
	[ 'negative factors', q{jsonb_set(d, '{factors}', '-4')}, qr/"factors" is -4, and must be between 1 and 4096/ ],
	[ 'a fraction of a factor', q{jsonb_set(d, '{factors}', '4.5')}, qr/"factors" is 4.5, and must be a whole number/ ],
	[ 'factors not matching the arrays', q{jsonb_set(d, '{factors}', '3')}, qr/22000: the factors of user 1 in table mallory.h_user_factors do not fit model "mallory.h".*They are not an array of 3 finite reals without nulls, the factors the model's description gives: they hold 4 values/s ],
	[ 'NaN', q{jsonb_set(d, '{regularization}', '"NaN"')}, qr/"regularization" must be a number/ ],
	[ 'a number beyond a real', q{jsonb_set(d, '{alpha}', '1e39')}, qr/"alpha" is 1000.*, and must be a number from 0 and at most 1e\+06/ ],
	[ 'a number below a real', q{jsonb_set(d, '{alpha}', '1e-50')}, qr/"alpha" is 0.0000.*must be a number from 0/ ],
	[ 'a negative weight', q{jsonb_set(d, '{unobserved_weight}', '-1')}, qr/"unobserved_weight" is -1, and must be a number from 0/ ],
	[ 'a missing field', q{d - 'feedback'}, qr/"feedback" is missing/ ],
	[ 'every field missing', q{'{"format": 1}'::jsonb}, qr/"source" is missing/ ],
	[ 'a null field', q{jsonb_set(d, '{solver}', 'null')}, qr/"solver" is null, and must be a string/ ],
	[ 'an unknown solver', q{jsonb_set(d, '{solver}', '"qr"')}, qr/"solver" is "qr", and must be one of "cg", "cholesky" and "subspace"/ ],
	[ 'a block size without solver subspace', q{jsonb_set(d, '{block_size}', '2')}, qr/"block_size" is given, and applies only to solver "subspace"/ ],
	[ 'subspace without a block size', q{jsonb_set(d, '{solver}', '"subspace"')}, qr/"block_size" is null, and solver "subspace" needs one/ ],
	[ 'a block size above the factors', q{jsonb_set(jsonb_set(d, '{solver}', '"subspace"'), '{block_size}', '9')}, qr/"block_size" is 9, and must be between 1 and 4/ ],
	[ 'more iterations run than asked', q{jsonb_set(d, '{iterations}', '3')}, qr/"iterations" is 3, and must be between 1 and 2/ ],
	[ 'a metric of no k', q{jsonb_set(jsonb_set(d, '{validation}', '0.1'), '{validation_metric}', '"ndcg@0"')}, qr/"validation_metric" is "ndcg\@0", and must be/ ],
	[ 'a validation without its metric', q{jsonb_set(d, '{validation}', '0.1')}, qr/"validation_metric" is null, and a validation needs one/ ],
	[ 'a validation share and a table', q{jsonb_set(jsonb_set(d, '{validation}', '0.1'), '{validation_table}', '"public.t"')}, qr/"validation_table" is given with "validation"/ ],
	[ 'a validation table that is not a name', q{jsonb_set(d, '{validation_table}', '"a.b.c"')}, qr/"validation_table" is "a.b.c", and must be a schema-qualified relation name/ ],
	[ 'a validation table named alone in format 2', q{jsonb_set(d, '{validation_table}', '"t"')}, qr/"validation_table" is "t", and must be a schema-qualified relation name/ ],
	[ 'a validation share above a half', q{jsonb_set(d, '{validation}', '0.9')}, qr/"validation" is 0.9, and must be a number above 0 and at most 0.5/ ],
	[ 'an impossible date', q{jsonb_set(d, '{trained_at}', '"2023-02-29T00:00:00.000000Z"')}, qr/"trained_at" is "2023-02-29T00:00:00.000000Z", and must be a time/ ],
	[ 'a date in another form', q{jsonb_set(d, '{trained_at}', '"yesterday"')}, qr/"trained_at" is "yesterday", and must be a time/ ],
	[ 'a negative loss', q{jsonb_set(d, '{loss}', '-1')}, qr/"loss" is -1, and must be a number from 0/ ],
	[ 'no users', q{jsonb_set(d, '{users}', '0')}, qr/"users" is 0, and must be between 1 and/ ],
	[ 'users beyond bigint', q{jsonb_set(d, '{users}', '99999999999999999999')}, qr/"users" is 99999999999999999999, and must be between 1 and 9223372036854775807/ ],
	[ 'a source that is not a name', q{jsonb_set(d, '{source}', '"a.b.c"')}, qr/"source" is "a.b.c", and must be a schema-qualified relation name/ ],
	[ 'a format to come', q{jsonb_set(d, '{format}', '4')}, qr/"format" is not 1, 2 or 3, the formats this version of wals reads/ ],
	[ 'a number for a boolean', q{jsonb_set(d, '{warm_start}', '1')}, qr/"warm_start" must be true or false/ ],
	[ 'a long column name', q{jsonb_set(d, '{user_col}', to_jsonb(repeat('x', 100)))}, qr/"user_col" must be a string of 1 to 63 bytes/ ],
	[ 'one column for users and items', q{jsonb_set(d, '{item_col}', d->'user_col')}, qr/"item_col" is "user_col" too/ ],
	[ 'an unknown device', q{jsonb_set(d, '{device}', '"tpu"')}, qr/"device" is "tpu", and must be one of/ ],
	[ 'not JSON', q{'{"factors": NaN}'}, qr/22P02: invalid description of model "mallory.h": it is not JSON/ ],
	[ 'a JSON array', q{'[1, 2]'}, qr/invalid description of model "mallory.h": it is not a JSON object/ ],
	[ 'deep nesting', q{repeat('[', 30000)}, qr/it is not JSON|54001: stack depth limit exceeded/ ],
	[ 'a number beyond numeric', q{'{"format": 1e200000}'}, qr/22003|22P02/ ],
	[ 'a long description', q{repeat(' ', 70000)}, qr/invalid description of model "mallory.h": it is 70000 bytes long/ ],
);
for my $case (@hostile)
{
	my ($name, $expr, $expected) = @$case;
	attach_h($name, desc_of($expr), $expected);
}

# No description, or the owner's own comment.
$node->safe_psql('dst', q{SET ROLE mallory; COMMENT ON COLUMN mallory.h_user_factors.factors IS NULL});
($ret, $out, $err) = as_role('dst', 'mallory', q{SELECT wals_attach_model('mallory.h')});
like($err, qr/55000: table mallory.h_user_factors carries no description of model "mallory.h".*Column "factors" has no comment/s,
	'no description: refused');
attach_h('a comment of the owner\'s own', q{'the factors'},
	qr/carries no description.*is not the one wals writes there/s);

# Rows and tables not as wals makes them.
describe_h(desc_of('d'));
for my $case (
	[ 'a null among the factors', q{UPDATE mallory.h_user_factors SET factors[2] = NULL WHERE user_id = 5},
	  qr/the factors of user 5 in table mallory.h_user_factors do not fit model "mallory.h".*they hold 4 values/s ],
	[ 'a NaN among the factors', q{UPDATE mallory.h_item_factors SET factors[1] = 'NaN' WHERE item_id = 7},
	  qr/the factors of item 7 in table mallory.h_item_factors do not fit/ ],
	[ 'factors of two dimensions', q{UPDATE mallory.h_user_factors SET factors = '{{1,2},{3,4}}' WHERE user_id = 9},
	  qr/the factors of user 9 in table mallory.h_user_factors do not fit/ ],
	[ 'no primary key', q{ALTER TABLE mallory.h_item_factors DROP CONSTRAINT h_item_factors_pkey},
	  qr/55000: table mallory.h_item_factors is not a factor table in the form wals makes/ ],
	[ 'a column more', q{ALTER TABLE mallory.h_user_factors ADD COLUMN note text},
	  qr/table mallory.h_user_factors is not a factor table in the form wals makes/ ],
	[ 'no rows', q{TRUNCATE mallory.h_user_factors},
	  qr/55000: table mallory.h_user_factors of model "mallory.h" holds no rows/ ],
	[ 'a view in place of a table', q{DROP TABLE mallory.h_item_factors; CREATE VIEW mallory.h_item_factors AS SELECT * FROM mallory.m_item_factors},
	  qr/42809: "mallory.h_item_factors" is not a table/ ],
	[ 'no item table', q{DROP TABLE mallory.h_item_factors},
	  qr/42P01: relation "mallory.h_item_factors" does not exist/ ],)
{
	my ($name, $change, $expected) = @$case;
	$node->safe_psql('dst', q{SET ROLE mallory;
DO $$ BEGIN
  IF to_regclass('mallory.h_item_factors') IS NOT NULL THEN
    EXECUTE CASE WHEN (SELECT relkind FROM pg_class WHERE oid = to_regclass('mallory.h_item_factors')) = 'v'
                 THEN 'DROP VIEW mallory.h_item_factors' ELSE 'DROP TABLE mallory.h_item_factors' END;
  END IF;
END $$;
CREATE TABLE mallory.h_item_factors (LIKE mallory.m_item_factors INCLUDING ALL);
INSERT INTO mallory.h_item_factors SELECT * FROM mallory.m_item_factors;
DROP TABLE mallory.h_user_factors;
CREATE TABLE mallory.h_user_factors (LIKE mallory.m_user_factors INCLUDING ALL);
INSERT INTO mallory.h_user_factors SELECT * FROM mallory.m_user_factors;});
	describe_h(desc_of('d'));
	$node->safe_psql('dst', "SET ROLE mallory; $change");
	($ret, $out, $err) = as_role('dst', 'mallory', q{SELECT wals_attach_model('mallory.h')});
	like($err, $expected, "$name: refused");
	unlike($err, qr/XX\d\d\d|server closed|connection to server was lost/,
		"$name: with no internal error");
}

# A description naming a table mallory may not read as the source: the
# model is attached, without that source, and nothing of it is read.
$node->safe_psql('dst', q{SET ROLE mallory;
DROP TABLE IF EXISTS mallory.h_item_factors;
CREATE TABLE mallory.h_item_factors (LIKE mallory.m_item_factors INCLUDING ALL);
INSERT INTO mallory.h_item_factors SELECT * FROM mallory.m_item_factors;
DROP TABLE mallory.h_user_factors;
CREATE TABLE mallory.h_user_factors (LIKE mallory.m_user_factors INCLUDING ALL);
INSERT INTO mallory.h_user_factors SELECT * FROM mallory.m_user_factors;});
describe_h(desc_of(q{jsonb_set(jsonb_set(d, '{source}', '"public.secret_ratings"'), '{rating_col}', '"rating"')}));
($ret, $out, $err) = as_role('dst', 'mallory',
	q{SET client_min_messages = notice; SELECT wals_attach_model('mallory.h')});
is($ret, 0, 'a description naming a source mallory may not read attaches') or diag($err);
like($err, qr/model "mallory.h" is attached without a source.*You may not read its source public.secret_ratings/s,
	'without that source, with a NOTICE saying why');
is($node->safe_psql('dst', q{SELECT source IS NULL, owner::text FROM wals_models WHERE model = 'h'}),
	't|mallory', 'the catalog records no source, and mallory as the owner');
($ret, $out, $err) = as_role('dst', 'mallory', q{SELECT wals_refresh_users('{1}', 'mallory.h')});
like($err, qr/42P01: model "mallory.h" has no source/, 'refreshing it is refused cleanly');
($ret, $out, $err) = as_role('dst', 'mallory', q{SELECT count(*) FROM wals_recommend(1, 3, 'mallory.h')});
is($out, '3', 'and it serves');
is($node->safe_psql('dst', q{SELECT count(*) FROM public.secret_ratings}), '1',
	'the superuser\'s table is intact');

# The settings analyst's model carries are intact, and so is the server.
is($node->safe_psql('dst', "SET ROLE analyst; SELECT count(*) FROM wals_recommend(1, 5, 'shop.ratings')"),
	'5', 'analyst\'s model serves on');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $start_time,
	'the server never restarted');

$node->stop;
done_testing();
