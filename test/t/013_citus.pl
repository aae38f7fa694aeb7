
# A Citus distributed table, where Citus is installed (Debian does not ship
# it, so this test says it is skipped there): a coordinator and two worker
# nodes, the ratings distributed by user over four shards.  wals_shards()
# names the nodes and the shard tables each reads; the model trained on
# the nodes equals the one trained here from the same rows; a row that
# cannot be solved, a cancel, a node that goes away each end the training
# with an error naming the node, and the model stays; no connection of a
# training is left open on the nodes; an ordinary role reads as itself
# there, once each node has granted it the shard functions.  A reference
# table, one copy, trains here.  doc/sharding.md's recipe (examples/citus) runs as it
# is, in a database of its own on the same nodes: analyst, an ordinary role
# whose password the workers ask for, loads the ratings and trains on the
# workers.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Recipes;
use ShardTest;
use Test::More;

my $coord = PostgreSQL::Test::Cluster->new('citus_coordinator');
$coord->init;
$coord->start;
my $available = $coord->safe_psql('postgres',
	q{SELECT count(*) FROM pg_available_extensions WHERE name = 'citus'});
if ($available ne '1')
{
	$coord->stop;
	plan skip_all => 'Citus is not installed (Debian does not ship it)';
}

my @workers;
for my $node ($coord, map { PostgreSQL::Test::Cluster->new("citus_worker$_") } (1, 2))
{
	$node->init if $node != $coord;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'citus'
client_min_messages = warning
max_worker_processes = 16
});
	$node == $coord ? $node->restart : $node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
	push @workers, $node if $node != $coord;
}
my $sql = sprintf(q{SELECT citus_set_coordinator_host('%s', %d);}, $coord->host, $coord->port);
$sql .= sprintf(q{SELECT citus_add_node('%s', %d);}, $_->host, $_->port) for @workers;
$sql .= q{
CREATE EXTENSION wals;
SET citus.shard_count = 4;
CREATE TABLE ratings (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL);
SELECT create_distributed_table('ratings', 'user_id');
INSERT INTO ratings
  SELECT u, (u * 7 + g * 13) % 300 + 1, 1 + (u + g) % 5
  FROM generate_series(1, 1500) u, generate_series(1, 12) g;
CREATE TABLE ratings_here AS SELECT * FROM ratings;
};
$coord->safe_psql('postgres', $sql);
for my $w (@workers)
{
	is($w->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
		$coord->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
		'Citus installed wals on the worker at the same version');
}

my @names = map { $_->host . ':' . $_->port } @workers;
is( $coord->safe_psql(
		'postgres', q{SELECT string_agg(DISTINCT server, ',' ORDER BY server)
		  FROM wals_shards('ratings')}),
	join(',', sort @names), 'wals_shards() names the two worker nodes');
is( $coord->safe_psql(
		'postgres', q{SELECT count(*), count(DISTINCT remote_table), bool_and(remote_table LIKE 'public.ratings\_%')
		  FROM wals_shards('ratings')}),
	'4|4|t', 'and the four shard tables, each read once');

sub no_wals_connections
{
	my ($what) = @_;
	for my $k (0, 1)
	{
		ok( $workers[$k]->poll_query_until(
				'postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
				  WHERE application_name = 'wals'}),
			"$what: no connection of wals left on worker $k");
	}
}

for my $case (
	[ 'cg', q{solver => 'cg'} ],
	[ 'cholesky', q{solver => 'cholesky'} ],
	[ 'paged', q{solver => 'cg'}, q{SET wals.shard_message_size = '1kB';} ])
{
	my ($name, $args, $set) = @$case;
	$set //= '';
	my ($ret, $stdout, $stderr) = $coord->psql(
		'postgres', qq{SET client_min_messages = notice; $set
		  SELECT device, iterations, users, items, ratings FROM wals_train('ratings', 'user_id',
		    'item_id', 'rating', model => 's_$name', factors => 8, iterations => 5, $args)});
	is($ret, 0, "$name: trained on the worker nodes") or diag($stderr);
	is($stdout, 'shards|5|1500|300|18000', "$name: the summary says shards, every rating read");
	like($stderr, qr/NOTICE:  training model "public.s_$name" on 2 shards: servers "[^"]+:\d+", "[^"]+:\d+"/,
		"$name: a NOTICE names the nodes");
	$coord->safe_psql(
		'postgres', qq{SELECT * FROM wals_train('ratings_here', 'user_id', 'item_id', 'rating',
		  model => 'h_$name', factors => 8, iterations => 5, workers => 0, $args)});
	same_model($coord, "s_$name", "h_$name", $name);
}
no_wals_connections('after the trainings');

# ---------------------------------------------------------------------------
# A row that cannot be solved: the error of one server, naming the node.
my $before = unsolvable_row($coord, '[^"]+:\d+', 'the node');
my ($ret, $stdout, $stderr);
$coord->safe_psql('postgres', q{DELETE FROM ratings WHERE rating > 1e30});
no_wals_connections('after an error');

# The same error caught in a subtransaction: the connections of the
# training go with the subtransaction, while its transaction goes on.
$coord->safe_psql('postgres', q{INSERT INTO ratings VALUES (77, 5, 1e38)});
my $tx = $coord->background_psql('postgres', on_error_stop => 0);
$tx->set_query_timer_restart;
$tx->query_safe(q{BEGIN});
$tx->query(q{DO $$ BEGIN
  PERFORM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 's_cg',
    factors => 8, alpha => 1e6, solver => 'cholesky');
EXCEPTION WHEN invalid_parameter_value THEN RAISE WARNING 'caught: %', SQLERRM;
END $$});
like($tx->{stderr}, qr/WARNING:  caught: could not solve the factors of user 77/,
	'the training fails in a subtransaction');
no_wals_connections('after its subtransaction aborted, its transaction still open');
is($tx->query(q{SELECT 'goes on'}), 'goes on', 'and the transaction goes on');
$tx->query('COMMIT');
$tx->quit;
$coord->safe_psql('postgres', q{DELETE FROM ratings WHERE rating > 1e30});

# A transaction that has changed the table on the nodes sees its changes
# only through Citus's connections: it trains here, reading through Citus.
($ret, $stdout, $stderr) = $coord->psql(
	'postgres', q{SET client_min_messages = notice;
BEGIN;
INSERT INTO ratings VALUES (1501, 1, 5);
SELECT device, users, ratings FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
  model => 's_tx', factors => 8, iterations => 2);
ROLLBACK;});
is($stdout, 'cpu|1501|18001', 'a transaction that wrote to the table trains here, on its own rows')
  or diag($stderr);
like($stderr, qr/NOTICE:  model "public.s_tx" trains here, reading "ratings" through Citus/,
	'and says so');

# ---------------------------------------------------------------------------
# A cancel on the coordinator stops the nodes, and leaves nothing there.
my $bg = $coord->background_psql('postgres', on_error_stop => 0, timeout => 120);
$bg->set_query_timer_restart;
my $pid = $bg->query_safe('SELECT pg_backend_pid()');

cancel_training($coord, $bg, $pid);
no_wals_connections('after a cancel');
is($coord->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 's_cg'}),
	$before, 'the cancelled training left the model as it was');
like($bg->query_safe(q{SELECT device, iterations FROM wals_train('ratings', 'user_id', 'item_id',
	'rating', model => 's_again', factors => 8, iterations => 2)}),
	qr/^shards\|2$/, 'the same session trains on the nodes again');

# A node that goes away in the middle: an error naming it.
lose_shard($coord, $bg, $pid, $workers[1], $workers[1]->host . ':' . $workers[1]->port);
is($coord->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 's_cg'}),
	$before, 'the model stays as it was');

# ---------------------------------------------------------------------------
# An ordinary role: SELECT checked here, and on the nodes it reads as
# itself, with its privileges there.
$coord->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
});
sub as_alice
{
	return $coord->psql(
		'postgres', q{SET ROLE alice;
		  SELECT device FROM wals_train('public.ratings', 'user_id', 'item_id', 'rating',
		    model => 'alice.m', factors => 8, iterations => 2)});
}
($ret, $stdout, $stderr) = as_alice();
like($stderr, qr/ERROR:  permission denied for table ratings/,
	'a role without SELECT on the source is refused');
$coord->safe_psql('postgres', q{GRANT SELECT ON ratings TO alice});
($ret, $stdout, $stderr) = as_alice();
like($stderr, qr/ERROR:  permission denied for function wals_shard_load.*shard on server "[^"]+:\d+"/s,
	'a node refuses a role it has not granted the shard functions');
# Citus carries no grant on an extension's functions to its nodes: each
# node grants them itself.
for my $w (@workers)
{
	grant_shard_functions($w, 'alice', 'SET citus.enable_ddl_propagation = off;');
}
my $shard_table = $coord->safe_psql('postgres',
	q{SELECT remote_table FROM wals_shards('ratings') ORDER BY remote_table LIMIT 1});
for my $w (@workers)
{
	$w->safe_psql('postgres',
		qq{DO \$\$ BEGIN IF to_regclass('$shard_table') IS NOT NULL THEN
		  EXECUTE 'REVOKE SELECT ON $shard_table FROM alice'; END IF; END \$\$});
}
($ret, $stdout, $stderr) = as_alice();
like($stderr, qr/ERROR:  permission denied for table ratings_\d+.*shard on server "[^"]+:\d+"/s,
	'a node reads as the role, with its privileges there');
for my $w (@workers)
{
	$w->safe_psql('postgres',
		qq{DO \$\$ BEGIN IF to_regclass('$shard_table') IS NOT NULL THEN
		  EXECUTE 'GRANT SELECT ON $shard_table TO alice'; END IF; END \$\$});
}
($ret, $stdout, $stderr) = as_alice();
is($stdout, 'shards', 'with SELECT there, the role trains on the nodes') or diag($stderr);
is($coord->safe_psql('postgres', q{SELECT pg_get_userbyid(relowner) FROM pg_class
	WHERE oid = 'alice.m_user_factors'::regclass}), 'alice', 'and owns the model');

# ---------------------------------------------------------------------------
# A reference table is one copy: it trains here, read through Citus.
$coord->safe_psql('postgres', q{
CREATE TABLE ratings_ref (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL);
SELECT create_reference_table('ratings_ref');
INSERT INTO ratings_ref SELECT * FROM ratings_here;
});
is($coord->safe_psql('postgres', q{SELECT count(*) FROM wals_shards('ratings_ref')}),
	'0', 'a reference table has no shards');
is( $coord->safe_psql(
		'postgres', q{SELECT device, ratings FROM wals_train('ratings_ref', 'user_id', 'item_id',
		  'rating', model => 'r_cg', factors => 8, iterations => 5, workers => 0, solver => 'cg')}),
	'cpu|18000', 'a reference table trains here, every rating read');
same_model($coord, 'r_cg', 'h_cg', 'reference table');

# ---------------------------------------------------------------------------
# doc/sharding.md's recipe, examples/citus, each file as it is with only the hosts,
# ports and password it names replaced, in database app on every node.
# The workers ask analyst for its password, which Citus gives from
# pg_dist_authinfo, for its own connections and for the training's.
my $analyst_password = 'analyst-secret-2';
for my $node ($coord, @workers)
{
	$node->safe_psql('postgres', 'CREATE DATABASE app');
	($ret, $stdout, $stderr) = run_recipe($node, 'citus/1_every_node.sql');
	is($ret, 0, '1_every_node.sql runs on ' . $node->name) or diag($stderr);
	ask_password($node, 'analyst');
}
($ret, $stdout, $stderr) = run_recipe(
	$coord,
	'citus/2_coordinator.sql',
	values => {
		coordinator_host => $coord->host,
		coordinator_port => $coord->port,
		worker1_host => $workers[0]->host,
		worker1_port => $workers[0]->port,
		worker2_host => $workers[1]->host,
		worker2_port => $workers[1]->port,
		analyst_password => $analyst_password,
	});
is($ret, 0, '2_coordinator.sql runs on the coordinator') or diag($stderr);
($ret, $stdout, $stderr) = $workers[0]->psql('app', 'SELECT 1', extra_params => [ '-U', 'analyst' ]);
like($stderr, qr/no password supplied|password authentication failed/,
	'a worker asks analyst for its password');
($ret, $stdout, $stderr) = run_recipe($coord, 'citus/3_load.sql',
	user => 'analyst', password => $analyst_password, stdin => ratings_csv(2000, 15));
is($ret, 0, '3_load.sql loads the ratings as analyst') or diag($stderr);
($ret, $stdout, $stderr) = run_recipe($coord, 'train.sql',
	user => 'analyst', password => $analyst_password);
is($ret, 0, 'train.sql runs as analyst') or diag($stderr);
my %servers = map { $_ => 1 } $stdout =~ /^\d+\|([^|]+:\d+)\|/mg;
is_deeply([ sort keys %servers ], [ sort @names ], 'wals_shards() names both workers');
trained_as_recipe($coord, $stdout, 30000, 'workers');

done_testing();
