
# Uninstalling wals.  DROP EXTENSION wals is refused while models hold
# factor tables (2BP01, naming them, with what to do), and so are DROP
# SCHEMA ... CASCADE of its schema and DROP OWNED BY its owner, which would
# drop it without naming it; DROP EXTENSION wals CASCADE drops each model's
# factor tables that are still its own, and what depends on them, leaving a
# table its owner renamed, with a NOTICE each, and waits for a training
# under way to drop its model too.  Then wals can be installed again.  A
# role that may not drop wals is refused by PostgreSQL before wals reads
# or locks anything; commands that do not drop wals, a drop with no model
# left, and pg_restore --clean (which drops the tables before the
# extension) go on as before; dropping wals from code that wals runs is
# refused with 55006.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init;
$node->append_conf('postgresql.conf', "client_min_messages = warning\n");
$node->start;

my $ratings = q{
  SELECT u AS user_id, (u * 7 + g * 13) % 200 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 300) u, generate_series(1, 10) g};
my $train = q{factors => 4, iterations => 2};

# Three models: the superuser's public.a, and a tenant's tenant.t, with a
# view on its item factors, and tenant.moved, whose user factor table the
# tenant renamed.
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION wals;
CREATE EXTENSION postgres_fdw;
CREATE ROLE tenant LOGIN;
CREATE SCHEMA tenant AUTHORIZATION tenant;
CREATE SCHEMA spare;
CREATE TABLE ratings AS $ratings;
SELECT count(*) FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'a', $train);
SET ROLE tenant;
CREATE TABLE tenant.r AS $ratings;
SELECT count(*) FROM wals_train('tenant.r', 'user_id', 'item_id', 'rating', model => 'tenant.t', $train);
SELECT count(*) FROM wals_train('tenant.r', 'user_id', 'item_id', 'rating', model => 'tenant.moved', $train);
CREATE VIEW tenant.first_items AS SELECT item_id FROM tenant.t_item_factors WHERE item_id < 10;
ALTER TABLE tenant.moved_user_factors RENAME TO kept;
});

my $state = q{
SELECT string_agg(schema || '.' || model, ',' ORDER BY schema, model) FROM wals_models;
SELECT string_agg(c.oid::regclass::text, ',' ORDER BY c.oid::regclass::text) FROM pg_class c
  WHERE c.relnamespace IN ('public'::regnamespace, 'tenant'::regnamespace) AND c.relkind IN ('r', 'v')
    AND c.relname NOT LIKE 'wals\_%';
};
my $before = $node->safe_psql('postgres', $state);
is( $before,
	"public.a,tenant.moved,tenant.t\n"
	  . 'a_item_factors,a_user_factors,ratings,tenant.first_items,tenant.kept,'
	  . 'tenant.moved_item_factors,tenant.r,tenant.t_item_factors,tenant.t_user_factors',
	'three models, a view on a factor table, a renamed factor table');

sub drop
{
	my ($sql, $role) = @_;
	my $as = defined $role ? "SET ROLE $role;" : '';
	return $node->psql('postgres',
		"SET client_min_messages = notice; $as\n\\set VERBOSITY verbose\n$sql");
}

sub installed
{
	my ($db) = @_;
	return $node->safe_psql($db // 'postgres',
		q{SELECT count(*) FROM pg_extension WHERE extname = 'wals'});
}

# A role that may not drop wals meets PostgreSQL's refusal, at once: the
# trigger neither reads nor locks the catalog (a session holds it).
my $holder = $node->background_psql('postgres', on_error_stop => 0);
$holder->set_query_timer_restart;
$holder->query_safe('BEGIN; SELECT count(*) FROM wals_models');
for my $sql ('DROP EXTENSION wals', 'DROP EXTENSION wals CASCADE')
{
	my ($ret, $out, $err) = drop("SET lock_timeout = '2s'; $sql", 'tenant');
	like($err, qr/ERROR:  42501: must be owner of extension wals/,
		"the tenant is refused by PostgreSQL, not by a lock: $sql");
	unlike($err, qr/model|lock timeout/, 'and wals said nothing');
}
$holder->query_safe('COMMIT');
$holder->quit;

# RESTRICT: refused, naming the models, with what to do; nothing changes.
my ($ret, $out, $err) = drop('DROP EXTENSION wals');
isnt($ret, 0, 'DROP EXTENSION wals fails while models exist');
like(
	$err,
	qr/ERROR:  2BP01: cannot drop extension wals because 3 models depend on it
DETAIL:  model "public.a" depends on extension wals
model "tenant.moved" depends on extension wals
model "tenant.t" depends on extension wals
HINT:  Drop the models with wals_drop_model\(\), or use DROP EXTENSION wals CASCADE to drop their factor tables too./,
	'2BP01, the models, and the hint');
is($node->safe_psql('postgres', $state), $before, 'every model and table is kept');
is(installed(), '1', 'and wals');

for my $sql ('DROP EXTENSION IF EXISTS nonexistent, wals', 'DROP EXTENSION wals RESTRICT',
	'DROP SCHEMA public CASCADE')
{
	($ret, $out, $err) = drop($sql);
	like($err, qr/ERROR:  2BP01: cannot drop extension wals because 3 models depend on it/,
		"refused: $sql");
}
like($err, qr/HINT:  This command would drop extension wals but not the models' factor tables: first drop the models with wals_drop_model\(\), or the extension with DROP EXTENSION wals CASCADE./,
	'a command that drops wals without naming it says to drop the models or wals first');
is($node->safe_psql('postgres', $state), $before, 'nothing changed');

# Commands that do not drop wals go on.
for my $sql ('DROP EXTENSION IF EXISTS nonexistent', 'DROP EXTENSION postgres_fdw',
	'DROP SCHEMA spare CASCADE', 'DROP SCHEMA IF EXISTS nonexistent',
	'BEGIN; DROP OWNED BY tenant CASCADE; ROLLBACK')
{
	($ret, $out, $err) = drop($sql);
	is($ret, 0, "unaffected: $sql") or diag($err);
	unlike($err, qr/model/, 'wals said nothing');
}
is($node->safe_psql('postgres', $state), $before, 'the models are all there');

# The trigger's function is not called from SQL.
($ret, $out, $err) = drop('SELECT wals_uninstall()');
like($err, qr/ERROR:  39P01: wals_uninstall\(\) can only be called by its event trigger/,
	'a superuser calling wals_uninstall() gets an error');
($ret, $out, $err) = drop('SELECT wals_uninstall()', 'tenant');
like($err, qr/ERROR:  42501: permission denied for function wals_uninstall/,
	'an ordinary role may not call it');

# Nor from code that wals runs: a source view's function, run by a
# training of the superuser, that drops wals.
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION public.uninstall() RETURNS bool LANGUAGE plpgsql
  AS $$BEGIN DROP EXTENSION wals CASCADE; RETURN true; END$$;
CREATE VIEW public.rv AS SELECT * FROM public.ratings WHERE public.uninstall();
});
($ret, $out, $err) = drop(
	qq{SELECT count(*) FROM wals_train('rv', 'user_id', 'item_id', 'rating', model => 'rv', $train)});
like($err, qr/ERROR:  55006: wals_uninstall\(\) cannot be called while another wals function is running/,
	'dropping wals from a view that a training reads is refused');
$node->safe_psql('postgres', 'DROP VIEW public.rv; DROP FUNCTION public.uninstall()');
is($node->safe_psql('postgres', $state), $before, 'and nothing changed');

# CASCADE: each model's tables that are still its own, and the view on one;
# the table the tenant renamed stays, said so.  The drop waits for a
# training under way, and drops the model it commits.
my $late = $node->background_psql('postgres', on_error_stop => 0);
$late->set_query_timer_restart;
$late->query_safe(
	qq{BEGIN; SELECT count(*) FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'late', $train)});
my $dropper = $node->background_psql('postgres', on_error_stop => 0);
$dropper->set_query_timer_restart;
$dropper->query_until(qr/sent/, q{\echo sent
SET client_min_messages = notice;
\set VERBOSITY verbose
DROP EXTENSION wals CASCADE;
\echo done
});
$node->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM pg_stat_activity
	  WHERE wait_event_type = 'Lock' AND query LIKE 'DROP EXTENSION wals CASCADE%'})
  or die 'the drop does not wait for the training';
$late->query_safe('COMMIT');
$late->quit;
pump_until($dropper->{run}, $dropper->{timeout}, \$dropper->{stdout}, qr/^done\n/m);
$err = $dropper->{stderr};
$dropper->quit;
unlike($err, qr/ERROR/, 'DROP EXTENSION wals CASCADE, once the training committed');
my $notices = join '.*', map { 'NOTICE:  00000: ' . quotemeta } (
	'drop cascades to model "public.a"',
	'drop cascades to model "public.late"',
	'drop cascades to model "tenant.moved"',
	'relation tenant.kept was left in place: it is no longer the table wals created for model "tenant.moved"',
	'drop cascades to model "tenant.t"',
	'drop cascades to view tenant.first_items');
like($err, qr/$notices/s, 'a NOTICE for each model, for the table left, for the view dropped');
is(installed(), '0', 'wals is gone');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(c.oid::regclass::text, ',' ORDER BY c.oid::regclass::text) FROM pg_class c
  WHERE c.relnamespace IN ('public'::regnamespace, 'tenant'::regnamespace) AND c.relkind IN ('r', 'v')}),
	'ratings,tenant.kept,tenant.r',
	'the factor tables are gone with the view; the renamed table and the sources stay');

# wals installs again, and trains.
$node->safe_psql('postgres', 'CREATE EXTENSION wals');
is( $node->safe_psql('postgres',
		qq{SELECT count(*) FROM wals_models;
		   SELECT count(*) FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'a', $train)}),
	"0\n1", 'wals installs again, with no model, and trains');

# A model whose tables are gone holds nothing: the plain drop goes on.
$node->safe_psql('postgres', 'DROP TABLE a_user_factors, a_item_factors');
($ret, $out, $err) = drop('DROP EXTENSION wals');
is($ret, 0, 'DROP EXTENSION wals when no model holds a table') or diag($err);
is(installed(), '0', 'wals is gone');
$node->safe_psql('postgres', 'CREATE EXTENSION wals');
($ret, $out, $err) = drop('DROP EXTENSION wals');
is($ret, 0, 'DROP EXTENSION wals with no model') or diag($err);
is(installed(), '0', 'wals is gone');

# DROP OWNED BY the extension's owner, a superuser other than the bootstrap
# one: refused while a model holds a table.
$node->safe_psql('postgres', 'CREATE ROLE admin SUPERUSER LOGIN; CREATE DATABASE owned');
$node->safe_psql(
	'owned', qq{
SET ROLE admin;
CREATE EXTENSION wals;
CREATE TABLE ratings AS $ratings;
SELECT count(*) FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'a', $train);
});
($ret, $out, $err) = $node->psql('owned', 'DROP OWNED BY admin');
like($err, qr/ERROR:  cannot drop extension wals because 1 model depends on it/,
	'DROP OWNED BY the owner of wals is refused while a model exists');
is(installed('owned'), '1', 'wals is kept');
$node->safe_psql('owned', q{SELECT wals_drop_model('a')});
$node->safe_psql('owned', 'DROP OWNED BY admin');
is(installed('owned'), '0', 'once the model is dropped, DROP OWNED BY its owner drops wals');

# pg_restore --clean drops the tables of a database before its extensions:
# the models hold nothing by then, and the restore goes through.
$node->safe_psql('postgres', 'CREATE DATABASE cleaned');
$node->safe_psql(
	'cleaned', qq{
CREATE EXTENSION wals;
CREATE TABLE ratings AS $ratings;
SELECT count(*) FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'a', $train);
});
my $serve = q{SELECT string_agg(item_id::text, ',') FROM wals_recommend(1, 5, 'a')};
my $served = $node->safe_psql('cleaned', $serve);
my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/cleaned.dump", '-d', 'cleaned' ],
	'pg_dump of a database with a model');
$node->command_ok(
	[ 'pg_restore', '--clean', '--if-exists', '--exit-on-error', '-d', 'cleaned',
		"$tmp/cleaned.dump" ],
	'pg_restore --clean into the same database');
is($node->safe_psql('cleaned', $serve), $served, 'the model serves as before');

# Where the library cannot be loaded, doc/operations.md has a superuser disable the
# trigger: DROP EXTENSION wals is then PostgreSQL's alone, and leaves the
# factor tables.
($ret, $out, $err) = $node->psql('cleaned',
	'ALTER EVENT TRIGGER wals_uninstall DISABLE; DROP EXTENSION wals');
is($ret, 0, 'with the trigger disabled, DROP EXTENSION wals goes through') or diag($err);
is($node->safe_psql('cleaned', q{SELECT count(*) FROM pg_class WHERE relname LIKE 'a\_%\_factors'}),
	'2', 'and leaves the factor tables');

$node->stop;
done_testing();
