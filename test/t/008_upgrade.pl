
# Upgrading: a database on 0.1.0 with a trained model is updated with
# ALTER EXTENSION wals UPDATE; the model serves exactly as before, the new
# functions work, and the updated extension holds the same objects as a new
# installation.  A view on a function whose signature changes stops the
# update with an error naming it, and nothing is half-done.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', 'client_min_messages = warning');
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals VERSION '0.1.0';
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 300 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 1000) u, generate_series(1, 15) g;
CREATE INDEX ON ratings (user_id);
SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm',
  factors => 8, iterations => 4);
});
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
	'0.1.0', 'version 0.1.0 installed');

my $serve_sql = q{
SELECT u, r.ord, r.item_id, r.score
FROM generate_series(1, 20) u, LATERAL wals_recommend(u, 5, 'm') WITH ORDINALITY r(item_id, score, ord)
ORDER BY u, r.ord;
SELECT wals_predict(3, 100, 'm');
SELECT version, loss FROM wals_models WHERE name = 'm';
SELECT md5(string_agg(item_id || ':' || factors::text, ',' ORDER BY item_id)) FROM m_item_factors;
};
my $before = $node->safe_psql('postgres', $serve_sql);

# A view on wals_recommend stops the update, which leaves 0.1.0 whole.
$node->safe_psql('postgres',
	q{CREATE VIEW picks AS SELECT * FROM wals_recommend(1, 5, 'm')});
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'ALTER EXTENSION wals UPDATE');
like($stderr, qr/cannot drop function wals_recommend.*\n.*view picks depends on function wals_recommend/,
	'a view on wals_recommend stops the update, naming the view');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
	'0.1.0', 'the failed update left 0.1.0');
is($node->safe_psql('postgres', $serve_sql), $before, '0.1.0 still serves the model');
$node->safe_psql('postgres', 'DROP VIEW picks');

$node->safe_psql('postgres', 'ALTER EXTENSION wals UPDATE');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
	'0.2.0', 'updated to 0.2.0');
is($node->safe_psql('postgres', $serve_sql), $before,
	'the model serves exactly as before the update');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM wals_recommend_batch('{1,2,3}', 5, 'm')}),
	'15', 'the new functions serve the old model');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM wals_recommend(1, 5, 'm', exclude_items => '{1,2}')}),
	'5', 'wals_recommend takes its new arguments');
is( $node->safe_psql(
		'postgres',
		q{SELECT metric FROM wals_evaluate('m', 'ratings', 'user_id', 'item_id') WHERE metric = 'users'}),
	'users', 'wals_evaluate works on the old model');

# The same objects as a new installation, function by function.
my $objects_sql = q{
SELECT pg_describe_object(d.classid, d.objid, 0) ||
       coalesce(' ' || pg_get_function_arguments(p.oid) || ' -> ' || pg_get_function_result(p.oid) ||
                ' ' || p.provolatile::text || p.proparallel::text || p.prosecdef::text ||
                p.proisstrict::text, '')
FROM pg_depend d LEFT JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
WHERE d.refclassid = 'pg_extension'::regclass
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'wals') AND d.deptype = 'e'
ORDER BY 1};
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION wals');
is($node->safe_psql('postgres', $objects_sql), $node->safe_psql('fresh', $objects_sql),
	'the updated extension has the objects of a new installation');

# Training goes on after the update.
$node->safe_psql('postgres',
	q{SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm',
	  factors => 8, iterations => 4, seed => 5)});
cmp_ok($node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE name = 'm'}),
	'>', (split /\|/, (split /\n/, $before)[-2])[0],
	'a retraining after the update draws a new version');

$node->stop;
done_testing();
