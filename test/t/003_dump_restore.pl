
# pg_dump keeps models: after a dump (custom and plain formats) and a restore
# into a new database, the catalog, the training log, the factor tables and
# what the models serve are identical, and the version counter goes on from
# where it was.  A model whose factor table its owner dropped keeps, in the
# dump, the number of the table it named, which after a restore may name
# another role's table: that table is then never read, written or taken for
# the model's owner, and the model can still be dropped.  A validation table
# is restored by name, as the source is; one dropped before the dump keeps
# its number, and a relation of another role behind it is never read by a
# retraining.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql(
	'src', q{
CREATE EXTENSION wals;
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 500 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 2000) u, generate_series(1, 20) g;
CREATE SCHEMA shop;
CREATE TABLE shop.purchases AS
  SELECT c AS customer, (c * 11 + g * 3) % 300 + 1 AS product
  FROM generate_series(1, 1000) c, generate_series(1, 10) g;
SELECT 1 FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm',
  factors => 16, iterations => 5, feedback => 'explicit', regularization => 0.05);
CREATE TABLE shop.held AS
  SELECT c AS customer, (c * 11 + 33) % 300 + 1 AS product FROM generate_series(1, 1000) c;
SELECT 1 FROM wals_train('shop.purchases', 'customer', 'product', model => 'shop.Shop Model',
  factors => 8, iterations => 4, alpha => 2, seed => 3, tolerance => 0.0001,
  validation_table => 'shop.held', patience => 10);
-- retrained: the log holds two versions of m
SELECT 1 FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm',
  factors => 16, iterations => 6, feedback => 'explicit', regularization => 0.05, seed => 5);
-- trained last and dropped: the version counter is ahead of every version
-- left in the catalog
SELECT 1 FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'tmp',
  factors => 4, iterations => 2);
SELECT wals_drop_model('tmp');
});

# Everything observable about the models of a database.
my %queries = (
	'wals_models' => q{SELECT * FROM wals_models ORDER BY schema, model},
	'wals_training_log' =>
	  q{SELECT * FROM wals_training_log ORDER BY model, version, iteration},
	'factor tables' => q{
SELECT n.nspname, c.relname, c.relkind,
       (SELECT string_agg(pg_get_indexdef(i.indexrelid), '; ')
        FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname LIKE '%\_factors' ORDER BY 1, 2},
	'factors of m' => q{
SELECT md5(string_agg(user_id || ':' || factors::text, ',' ORDER BY user_id)) FROM m_user_factors;
SELECT md5(string_agg(item_id || ':' || factors::text, ',' ORDER BY item_id)) FROM m_item_factors},
	'factors of Shop Model' => q{
SELECT md5(string_agg(user_id || ':' || factors::text, ',' ORDER BY user_id)) FROM shop."Shop Model_user_factors";
SELECT md5(string_agg(item_id || ':' || factors::text, ',' ORDER BY item_id)) FROM shop."Shop Model_item_factors"},
	'recommendations of m' => q{
SELECT u, r.ord, r.item_id, r.score
FROM generate_series(1, 12) u,
     LATERAL wals_recommend(u, 5, 'm') WITH ORDINALITY r(item_id, score, ord)
ORDER BY u, r.ord},
	'recommendations of Shop Model' => q{
SELECT u, r.ord, r.item_id, r.score
FROM generate_series(1, 12) u,
     LATERAL wals_recommend(u, 5, 'shop.Shop Model', exclude_rated => false)
       WITH ORDINALITY r(item_id, score, ord)
ORDER BY u, r.ord},
	'predictions' => q{
SELECT u, i, wals_predict(u, i, 'm'), wals_predict(u, i, 'shop.Shop Model')
FROM generate_series(1, 9) u, generate_series(1, 300, 37) i ORDER BY u, i},);

sub snapshot
{
	my ($db) = @_;
	my %s;
	$s{$_} = $node->safe_psql($db, $queries{$_}) for keys %queries;
	return \%s;
}

my $before = snapshot('src');
like($before->{'wals_models'}, qr/^m\|.*\nShop Model\|[^\n]*$/s,
	'two models in the source database');
like($before->{'recommendations of m'}, qr/^1\|1\|\d+\|/,
	'm serves recommendations');
like($before->{'recommendations of Shop Model'}, qr/^1\|1\|\d+\|/,
	'Shop Model serves recommendations');
my $src_seq = $node->safe_psql('src',
	'SELECT last_value FROM wals_model_version_seq');
my $src_max = $node->safe_psql('src', 'SELECT max(version) FROM wals_models');
cmp_ok($src_seq, '>', $src_max,
	'the version counter is ahead of the catalog (a model was dropped)');

my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->command_ok(
	[ 'pg_dump', '-Fc', '-f', "$tmp/src.dump", '-d', 'src' ],
	'pg_dump, custom format');
$node->command_ok(
	[ 'pg_dump', '-Fp', '-f', "$tmp/src.sql", '-d', 'src' ],
	'pg_dump, plain format');

$node->command_ok([ 'createdb', 'restored_c' ], 'createdb restored_c');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', 'restored_c', "$tmp/src.dump" ],
	'pg_restore');
$node->command_ok([ 'createdb', 'restored_p' ], 'createdb restored_p');
$node->command_ok(
	[
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'restored_p',
		'-f', "$tmp/src.sql"
	],
	'psql < plain dump');

for my $db ('restored_c', 'restored_p')
{
	my $after = snapshot($db);
	for my $what (sort keys %queries)
	{
		is($after->{$what}, $before->{$what}, "$db: $what identical");
	}

	is($node->safe_psql($db, 'SELECT last_value FROM wals_model_version_seq'),
		$src_seq, "$db: the version counter was restored");

	# Retraining in the restored database.
	$node->safe_psql($db,
		q{SELECT 1 FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm',
		  factors => 16, iterations => 3, feedback => 'explicit', seed => 9)});
	my $v = $node->safe_psql($db, q{SELECT version FROM wals_models WHERE model = 'm'});
	cmp_ok($v, '>', $src_seq,
		"$db: a retraining draws a version greater than any restored one");
	is( $node->safe_psql(
			$db,
			qq{SELECT count(*), max(iteration) FROM wals_training_log
			   WHERE model = 'm' AND version = $v}),
		'3|3',
		"$db: the retraining is logged");
	isnt($node->safe_psql($db, $queries{'recommendations of m'}),
		$before->{'recommendations of m'},
		"$db: the retrained m serves new recommendations");
	is($node->safe_psql($db, $queries{'recommendations of Shop Model'}),
		$before->{'recommendations of Shop Model'},
		"$db: Shop Model still serves the same recommendations");
	is($node->safe_psql($db,
			q{SELECT validation_table = 'shop.held'::regclass, validation_owner = current_user::regrole
			  FROM wals_models WHERE model = 'Shop Model'}),
		't|t', "$db: its validation table is the restored shop.held, of its owner");
	$node->safe_psql($db, q{SELECT 1 FROM wals_retrain('shop.Shop Model', iterations => 2)});
	is($node->safe_psql($db,
			q{SELECT validation_table = 'shop.held'::regclass AND validation_score IS NOT NULL
			  FROM wals_models WHERE model = 'Shop Model'}),
		't', "$db: and Shop Model retrains, validating on it");

	# A new model, and dropping a restored one.
	$node->safe_psql($db,
		q{SELECT 1 FROM wals_train('ratings', 'user_id', 'item_id', model => 'fresh',
		  factors => 4, iterations => 2)});
	cmp_ok($node->safe_psql($db, q{SELECT version FROM wals_models WHERE model = 'fresh'}),
		'>', $v, "$db: a new model gets the next version");
	$node->safe_psql($db, q{SELECT wals_drop_model('shop.Shop Model')});
	is( $node->safe_psql(
			$db,
			q{SELECT (SELECT count(*) FROM wals_models WHERE model = 'Shop Model')
			       + (SELECT count(*) FROM wals_training_log WHERE model = 'Shop Model')
			       + (SELECT count(*) FROM pg_class WHERE relname LIKE 'Shop Model%')}),
		'0',
		"$db: a restored model can be dropped");
}

# A dangling model: its owner, an ordinary role, dropped its user factor
# table.  After the restore the number the catalog keeps is made to name a
# table of the superuser, as a restore into another cluster may make it.
$node->safe_psql('postgres', q{CREATE ROLE tenant LOGIN; CREATE DATABASE dsrc});
$node->safe_psql(
	'dsrc', q{
CREATE EXTENSION wals;
CREATE TABLE secret (user_id bigint, factors real[], rated bytea);
INSERT INTO secret VALUES (1, '{1,2}', '\x00');
CREATE TABLE seen (who name);
GRANT INSERT ON seen TO PUBLIC;
CREATE SCHEMA tenant AUTHORIZATION tenant;
SET ROLE tenant;
CREATE TABLE tenant.r AS
  SELECT u AS user_id, (u * 7 + g) % 30 + 1 AS item_id FROM generate_series(1, 50) u, generate_series(1, 5) g;
CREATE FUNCTION tenant.spy() RETURNS bool LANGUAGE sql
  AS $$INSERT INTO public.seen VALUES (current_user) RETURNING true$$;
CREATE VIEW tenant.v AS SELECT user_id, item_id FROM tenant.r WHERE tenant.spy();
SELECT 1 FROM wals_train('tenant.v', 'user_id', 'item_id', model => 'tenant.dangling',
  factors => 2, iterations => 1);
DROP TABLE tenant.dangling_user_factors;
CREATE TABLE tenant.held AS SELECT user_id, (user_id * 3) % 30 + 1 AS item_id FROM tenant.r;
SELECT 1 FROM wals_train('tenant.r', 'user_id', 'item_id', model => 'tenant.validated',
  factors => 2, iterations => 2, validation_table => 'tenant.held');
DROP TABLE tenant.held;
});
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/dsrc.dump", '-d', 'dsrc' ],
	'pg_dump of a database with a dangling model');
$node->command_ok([ 'createdb', 'drestored' ], 'createdb drestored');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', 'drestored', "$tmp/dsrc.dump" ],
	'pg_restore of a database with a dangling model');
$node->safe_psql('drestored', q{TRUNCATE seen;
  UPDATE wals_models SET user_factors = 'secret'::regclass WHERE model = 'dangling'});
for my $sql (
	q{SELECT wals_refresh_users('{1, 2}', 'tenant.dangling')},
	q{SELECT * FROM wals_recommend(1, 3, 'tenant.dangling')},
	q{SELECT * FROM wals_rated_items(1, 'tenant.dangling')},
	q{SELECT * FROM wals_train('tenant.v', 'user_id', 'item_id', model => 'tenant.dangling',
	  factors => 2, iterations => 1, warm_start => true)})
{
	for my $role ('tenant', 'postgres')
	{
		my ($ret, $out, $err) = $node->psql('drestored', "SET ROLE $role; $sql");
		like($err, qr/the user factor table of model "tenant.dangling" is no longer the table wals created for it/,
			"as $role, refused: $sql");
	}
}
is($node->safe_psql('drestored', q{SELECT count(*) FROM seen}), '0',
	'no code of the tenant ran, as itself or as the superuser');

# The validation table the tenant dropped before the dump: its number is
# made to name a view of the superuser's, which records who reads it and
# which the tenant may read.  It is not the relation the model validated
# on, and no retraining reads it.
$node->safe_psql('drestored', q{
CREATE FUNCTION public.watch() RETURNS bool LANGUAGE sql
  AS $$INSERT INTO public.seen VALUES (current_user) RETURNING true$$;
CREATE VIEW public.peek AS SELECT user_id, item_id FROM tenant.r WHERE public.watch();
GRANT SELECT ON public.peek TO tenant;
UPDATE wals_models SET validation_table = 'public.peek'::regclass WHERE model = 'validated'});
for my $role ('tenant', 'postgres')
{
	my ($ret, $out, $err) = $node->psql('drestored',
		"SET ROLE $role; SELECT * FROM wals_retrain('tenant.validated')");
	like($err, qr/the validation table of model "tenant.validated" is no longer the relation it validated on/,
		"as $role, a retraining is refused where the validation table's number names another role's relation");
}
is($node->safe_psql('drestored', q{SELECT count(*) FROM seen}), '0',
	'which no retraining read');
my ($ret, $out, $err) = $node->psql('drestored', q{SET ROLE tenant; SELECT wals_drop_model('tenant.dangling')});
is($ret, 0, 'its owner can drop the dangling model') or diag($err);
like($err, qr/relation public.secret was left in place: it is no longer the table wals created/,
	'leaving the table its row named in place');
is($node->safe_psql('drestored', q{SELECT count(*) FROM secret WHERE factors = '{1,2}'}), '1',
	'the superuser\'s table is intact');
is($node->safe_psql('dsrc', q{SELECT owner FROM wals_models WHERE model = 'dangling'}),
	'tenant', 'the owner of a model is recorded as the role that trained it');

# The source database was not touched by any of this.
my $src_after = snapshot('src');
is_deeply($src_after, $before, 'the source database is unchanged');

$node->stop;
done_testing();
