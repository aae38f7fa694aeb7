
# pg_upgrade of a cluster holding models, from an older major (the
# installation WALS_UPGRADE_FROM names, with wals installed) to the one
# under test: a model with rated items kept for serving, owned by an
# ordinary role; a warm-started one; one trained on the shards of a source
# whose partitions are postgres_fdw foreign tables (the shards stay on the
# older major); and a database whose wals is still 0.1.0.  pg_upgrade
# accepts the catalog (its regclass and regrole columns keep their OIDs);
# every model serves bit-identical results after, with the same factors,
# catalog rows, logs and settings comments; each retrains, drawing versions
# after the old ones; the uninstall trigger guards DROP EXTENSION on the
# new cluster; and ALTER EXTENSION wals UPDATE takes the 0.1.0 database,
# its model included, to the current version there.
#
# Skipped without WALS_UPGRADE_FROM: `make test-pg17` and `make test-pg18`
# (test/pg_test.sh) set it to the PostgreSQL 15 of make test-cassert,
# where they install wals too.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use ShardTest;
use Test::More;
use UpgradeTest;

my $old_install = $ENV{WALS_UPGRADE_FROM} // '';
plan skip_all => 'WALS_UPGRADE_FROM names no older PostgreSQL installation (the directory holding '
  . 'bin/pg_config) with wals installed to upgrade from; make test-pg17 and test-pg18 set it'
  if $old_install eq '';

# Both clusters with data checksums, which initdb turns on by default from
# 18 only: pg_upgrade needs them alike.
my @initdb = (extra => ['--data-checksums']);
my $new = PostgreSQL::Test::Cluster->new('new');
$new->init(@initdb);
$new->start;
my $old = PostgreSQL::Test::Cluster->new('old', install_path => $old_install);
$old->init(@initdb);
$old->append_conf('postgresql.conf', "client_min_messages = warning\n");
$old->start;

cmp_ok($old->pg_version->major, '<', $new->pg_version->major,
	'WALS_UPGRADE_FROM is an older major than the server under test')
  or BAIL_OUT('cannot upgrade from ' . $old->pg_version . ' to ' . $new->pg_version);
my $available = q{SELECT default_version FROM pg_available_extensions WHERE name = 'wals'};
my $version = $new->safe_psql('postgres', $available);
is($old->safe_psql('postgres', $available), $version,
	"the older server has wals $version installed, as the new one has");
$new->stop;

sub old_node
{
	my ($name) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name, install_path => $old_install);
	$node->init(@initdb);
	$node->append_conf('postgresql.conf', "client_min_messages = warning\n");
	$node->start;
	return $node;
}

# ---------------------------------------------------------------------------
# The models, on the older major.
my @shards = map { old_node("shard$_") } (0, 1);
for my $shard (@shards)
{
	$shard->safe_psql(
		'postgres', q{
CREATE EXTENSION wals;
CREATE TABLE ratings_part (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL);
});
}

my $sql = q{
CREATE EXTENSION wals;
CREATE EXTENSION postgres_fdw;
CREATE ROLE analyst LOGIN;
CREATE SCHEMA shop AUTHORIZATION analyst;
SET ROLE analyst;
CREATE TABLE shop.plays AS
  SELECT u AS user_id, (u * 7 + g * 13) % 300 + 1 AS item_id, 1 + (u + g) % 5 AS n
  FROM generate_series(1, 1500) u, generate_series(1, 12) g;
SELECT model FROM wals_train('shop.plays', 'user_id', 'item_id', 'n', model => 'shop.rated',
  factors => 8, iterations => 4);
SELECT model FROM wals_train('shop.plays', 'user_id', 'item_id', 'n', model => 'shop.warm',
  factors => 8, iterations => 3, seed => 7);
SELECT model FROM wals_train('shop.plays', 'user_id', 'item_id', 'n', model => 'shop.warm',
  factors => 8, iterations => 2, warm_start => true);
RESET ROLE;
} . fdw_partitions(@shards) . q{
INSERT INTO ratings
  SELECT u, (u * 7 + g * 13) % 300 + 1, 1 + (u + g) % 5
  FROM generate_series(1, 1000) u, generate_series(1, 10) g;
};
$old->safe_psql('postgres', $sql);
is( $old->safe_psql(
		'postgres', q{SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
		  model => 'sharded', factors => 8, iterations => 4, solver => 'cg')}),
	'shards', 'the model of the sharded source is trained on its shards');

# A database still on 0.1.0, whose model is written as 0.1.0 wrote one:
# two factor tables and a catalog row, here those of shop.rated and its
# source.  The library refuses to serve it until the extension is updated.
$old->safe_psql('postgres', 'CREATE DATABASE v010');
my $copy = $old->safe_psql(
	'postgres', q{
SELECT 'CREATE TABLE plays (user_id int, item_id int, n int);'
       || string_agg(format('INSERT INTO plays VALUES (%s, %s, %s);', user_id, item_id, n), '')
FROM shop.plays;
} . v010_model_sql('shop', 'rated', 'public.plays', 'n'));
$old->safe_psql(
	'v010', qq{
CREATE EXTENSION wals VERSION '0.1.0';
CREATE TABLE m_user_factors (user_id bigint NOT NULL PRIMARY KEY, factors real[] NOT NULL);
CREATE TABLE m_item_factors (item_id bigint NOT NULL PRIMARY KEY, factors real[] NOT NULL);
$copy
});

# ---------------------------------------------------------------------------
# What the models serve and hold, to the bit: scores as float4send's bytes,
# factors as text (the shortest text that reads back as the same float).
my $models = q{ARRAY['shop.rated', 'shop.warm', 'public.sharded']};
my $serve_sql = qq{
SELECT m, u, r.ord, r.item_id, encode(float4send(r.score), 'hex')
FROM unnest($models) m, generate_series(1, 40) u,
     LATERAL wals_recommend(u, 10, m) WITH ORDINALITY r(item_id, score, ord)
ORDER BY 1, 2, 3;
SELECT m, r.item_id, encode(float4send(r.score), 'hex')
FROM unnest($models) m, LATERAL wals_recommend(7, 5, m, exclude_rated => false) r ORDER BY 1, 2;
SELECT m, encode(float4send(wals_predict(3, 100, m)), 'hex') FROM unnest($models) m ORDER BY 1;
SELECT m, b.user_id, b.item_id, encode(float4send(b.score), 'hex')
FROM unnest($models) m, LATERAL wals_recommend_batch('{1,2,3}', 5, m) b ORDER BY 1, 2, 3;
SELECT m, s.item_id, encode(float4send(s.similarity), 'hex')
FROM unnest($models) m, LATERAL wals_similar_items(11, 5, m) s ORDER BY 1, 2;
SELECT m, md5(string_agg(u || ':' || r.item_id || ':' || r.rating, ',' ORDER BY u, r.item_id))
FROM unnest($models) m, generate_series(1, 1500) u, LATERAL wals_rated_items(u, m) r GROUP BY m ORDER BY 1;
};
my $tables_sql = q{
SELECT md5(string_agg(user_id || ':' || factors::text || ':' || encode(rated, 'hex'), ',' ORDER BY user_id))
FROM shop.rated_user_factors;
SELECT md5(string_agg(item_id || ':' || factors::text, ',' ORDER BY item_id)) FROM shop.rated_item_factors;
SELECT md5(string_agg(user_id || ':' || factors::text || ':' || encode(rated, 'hex'), ',' ORDER BY user_id))
FROM shop.warm_user_factors;
SELECT md5(string_agg(item_id || ':' || factors::text, ',' ORDER BY item_id)) FROM shop.warm_item_factors;
SELECT md5(string_agg(user_id || ':' || factors::text || ':' || encode(rated, 'hex'), ',' ORDER BY user_id))
FROM sharded_user_factors;
SELECT md5(string_agg(item_id || ':' || factors::text, ',' ORDER BY item_id)) FROM sharded_item_factors;
};
my $catalog_sql = q{
SELECT m.*, m.source::oid, m.user_factors::oid, m.item_factors::oid, m.owner::oid,
       col_description(m.user_factors, 2)
FROM wals_models m ORDER BY schema, model;
SELECT * FROM wals_training_log ORDER BY schema, model, version, iteration;
SELECT last_value FROM wals_model_version_seq;
SELECT extversion FROM pg_extension WHERE extname = 'wals';
};
my $served = $old->safe_psql('postgres', $serve_sql);
my $tables = $old->safe_psql('postgres', $tables_sql);
my $catalog = $old->safe_psql('postgres', $catalog_sql);
like($served, qr/^public\.sharded\|.*^shop\.rated\|.*^shop\.warm\|/ms, 'every model serves before');
like($catalog, qr/wals model settings: \{.*"format": 3/, 'with its settings described on its table');
my $v010_catalog = $old->safe_psql('v010', 'SELECT * FROM wals_models');

# ---------------------------------------------------------------------------
# pg_upgrade, the shards left running on the older major.
$old->stop;
my $oldbindir = $old->config_data('--bindir');
my $newbindir = $new->config_data('--bindir');
# pg_upgrade writes its scripts into the current directory.
chdir ${PostgreSQL::Test::Utils::tmp_check};
my $upgraded = run_log(
	[
		"$newbindir/pg_upgrade", '--no-sync',
		'--old-datadir' => $old->data_dir,
		'--new-datadir' => $new->data_dir,
		'--old-bindir' => $oldbindir,
		'--new-bindir' => $newbindir,
		'--socketdir' => $new->host,
		'--old-port' => $old->port,
		'--new-port' => $new->port,
		'--copy',
	]);
if (!ok($upgraded, 'pg_upgrade from ' . $old->pg_version->major . ' to ' . $new->pg_version->major))
{
	# What pg_upgrade refused: the end of each log it keeps on failure (the
	# whole of them is in the new cluster's pg_upgrade_output.d).
	for my $log (glob($new->data_dir . '/pg_upgrade_output.d/*/{,log/}*.{txt,log}'))
	{
		my @lines = split /\n/, slurp_file($log);
		diag("$log, last lines:\n" . join("\n", @lines[ ($#lines > 15 ? $#lines - 15 : 0) .. $#lines ]));
	}
	BAIL_OUT('pg_upgrade failed');
}
$new->append_conf('postgresql.conf', "client_min_messages = warning\n");
$new->start;

is($new->safe_psql('postgres', $serve_sql), $served,
	'every model serves bit-identical results on the new major');
is($new->safe_psql('postgres', $tables_sql), $tables, 'with the same factors and rated items');
is($new->safe_psql('postgres', $catalog_sql), $catalog,
	'the same catalog rows, relations by the same OIDs, settings comments, log and versions');

# ---------------------------------------------------------------------------
# The uninstall trigger came along, and its function loads.
my ($ret, $stdout, $stderr) = $new->psql('postgres', 'DROP EXTENSION wals');
like($stderr, qr/ERROR:  cannot drop extension wals because 3 models depend on it/,
	'DROP EXTENSION wals is refused while models exist');

# ---------------------------------------------------------------------------
# ALTER EXTENSION wals UPDATE on the new major: the database on 0.1.0, whose
# model the whole chain of update scripts brings along.
is($new->safe_psql('v010', 'SELECT * FROM wals_models'), $v010_catalog,
	'the database on 0.1.0 keeps its catalog through pg_upgrade');
($ret, $stdout, $stderr) = $new->psql('v010', 'ALTER EXTENSION wals UPDATE');
is($ret, 0, 'ALTER EXTENSION wals UPDATE from 0.1.0 succeeds on the new major') or diag($stderr);
is($new->safe_psql('v010', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
	$version, "to $version");
my $v010_serve = q{
SELECT u, r.ord, r.item_id, encode(float4send(r.score), 'hex')
FROM generate_series(1, 40) u, LATERAL wals_recommend(u, 10, '%s') WITH ORDINALITY r(item_id, score, ord)
ORDER BY 1, 2;
SELECT md5(string_agg(user_id || ':' || factors::text || ':' || encode(rated, 'hex'), ',' ORDER BY user_id))
FROM %s_user_factors;
};
is($new->safe_psql('v010', sprintf($v010_serve, 'm', 'm')),
	$new->safe_psql('postgres', sprintf($v010_serve, 'shop.rated', 'shop.rated')),
	'its model serves as the one it was copied from does, rated items left out');

my $objects_sql = q{
SELECT pg_describe_object(classid, objid, 0) FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'wals')
ORDER BY 1};
$new->safe_psql('postgres', 'CREATE DATABASE fresh');
$new->safe_psql('fresh', 'CREATE EXTENSION wals');
is($new->safe_psql('v010', $objects_sql), $new->safe_psql('fresh', $objects_sql),
	'the updated extension holds the objects of a new installation');
is( $new->safe_psql(
		'v010', q{SELECT iterations FROM wals_train('plays', 'user_id', 'item_id', 'n',
		  model => 'm', factors => 8, iterations => 2)}),
	'2', 'and trains');

# ---------------------------------------------------------------------------
# Retraining on the new major.
my $last_version = $new->safe_psql('postgres', 'SELECT max(version) FROM wals_models');
my $loss = q{SELECT loss FROM wals_models WHERE schema = '%s' AND model = '%s'};
my $rated_loss = $new->safe_psql('postgres', sprintf($loss, 'shop', 'rated'));
($ret, $stdout, $stderr) = $new->psql('postgres',
	q{SET ROLE analyst; SELECT device, iterations, users FROM wals_retrain('shop.rated')});
is($ret, 0, 'the model with rated items retrains') or diag($stderr);
is($stdout, 'cpu|4|1500', 'with its recorded settings, from its source');
cmp_ok(abs($new->safe_psql('postgres', sprintf($loss, 'shop', 'rated')) - $rated_loss),
	'<=', 1e-5 * $rated_loss, 'to the loss it had (the same rows, settings and seed)');
cmp_ok($new->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'rated'}),
	'>', $last_version, 'drawing a version after those of the older major');

my $warm_loss = $new->safe_psql('postgres', sprintf($loss, 'shop', 'warm'));
($ret, $stdout, $stderr) = $new->psql('postgres',
	q{SET ROLE analyst;
	  SELECT iterations FROM wals_retrain('shop.warm', warm_start => true, iterations => 1)});
is($ret, 0, 'the warm-started model retrains from its factors') or diag($stderr);
cmp_ok($new->safe_psql('postgres', sprintf($loss, 'shop', 'warm')), '<=', $warm_loss,
	'one more iteration from the upgraded factors lowers its loss');

my $sharded_loss = $new->safe_psql('postgres', sprintf($loss, 'public', 'sharded'));
($ret, $stdout, $stderr) = $new->psql('postgres',
	q{SELECT device, iterations, users FROM wals_retrain('sharded')});
is($ret, 0, 'the sharded model retrains, the shards still on the older major') or diag($stderr);
is($stdout, 'shards|4|1000', 'on its shards');
cmp_ok(abs($new->safe_psql('postgres', sprintf($loss, 'public', 'sharded')) - $sharded_loss),
	'<=', 1e-5 * $sharded_loss, 'to the loss it had');

is( $new->safe_psql(
		'postgres', qq{SELECT count(*) FROM unnest($models) m, generate_series(1, 40) u,
		  LATERAL wals_recommend(u, 10, m)}),
	3 * 40 * 10, 'the retrained models serve');

$new->stop;
$_->stop for @shards;
done_testing();
