
# A training over a source sharded by hash of user over two servers
# (postgres_fdw foreign partitions): wals_shards() names them, the model
# equals the one trained on this server from the same rows (every
# iteration's loss within 1e-5, the same recommendations; also with
# messages of 1 kB, every id, factor and rated item sent in pages, and of
# 24 kB, one shard's users passed on in pages and the other's whole; with
# no parallel workers on the shards, and with every row solved by them;
# with one shard holding every row; with one shard whose partition is
# empty, which trains as the others do), each shard reads only its own
# rows, a
# row that cannot be solved is the error it is on one server, naming the
# shard's server, and the previous model survives; in a transaction block
# the training reads the shards through postgres_fdw, seeing what the
# block wrote there.  A role
# that a shard has not made a peer (EXECUTE on the shard functions) is
# refused there before anything is read.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use ShardTest;
use Test::More;
use Time::HiRes;

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->append_conf('postgresql.conf', "client_min_messages = warning\n");
$coord->start;

my @shards;
for my $k (1, 2)
{
	my $node = PostgreSQL::Test::Cluster->new("shard$k");
	$node->init;
	# One worker beside each shard's backend: two processes take its rows
	# at once, as with more, for half the launches of the default.
	$node->append_conf('postgresql.conf', "max_parallel_maintenance_workers = 1\n");
	$node->start;
	$node->safe_psql(
		'postgres', q{
CREATE EXTENSION wals;
CREATE TABLE ratings_part (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL);
});
	push @shards, $node;
}

my $sql = q{
CREATE EXTENSION wals;
CREATE EXTENSION postgres_fdw;
} . fdw_partitions(@shards) . q{
INSERT INTO ratings
  SELECT u, (u * 7 + g * 13) % 300 + 1, 1 + (u + g) % 5
  FROM generate_series(1, 1500) u, generate_series(1, 12) g;
CREATE TABLE ratings_here AS SELECT * FROM ratings;
};
$coord->safe_psql('postgres', $sql);

is( $coord->safe_psql(
		'postgres', q{SELECT string_agg(shard || ':' || server || ':' || partition::text ||
		  ':' || remote_table, ',' ORDER BY shard) FROM wals_shards('ratings')}),
	'1:shard0:ratings_0:public.ratings_part,2:shard1:ratings_1:public.ratings_part',
	'wals_shards() names the servers and the partitions each reads');
is($coord->safe_psql('postgres', q{SELECT count(*) FROM wals_shards('ratings_here')}),
	'0', 'a local table has no shards');
my $rows = join ',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM ratings_part') } @shards;
like($rows, qr/^[1-9][0-9]*,[1-9][0-9]*$/, "both shards hold rows ($rows)");

for my $case (
	[ 'cg', q{solver => 'cg'} ],
	[ 'cholesky', q{solver => 'cholesky'} ],
	[ 'subspace', q{solver => 'subspace', block_size => 3} ],
	[ 'explicit', q{solver => 'cg', feedback => 'explicit'} ],
	[ 'scaled', q{solver => 'cg', regularization_exponent => 1, unobserved_weight => 0.1} ],
	[ 'paged', q{solver => 'cg'}, q{SET wals.shard_message_size = '1kB';} ],
	# shard0's 783 users (25328 bytes with their Gram) come in pages,
	# shard1's 717 (23216 bytes) with its answer
	[ 'mixed', q{solver => 'cg'}, q{SET wals.shard_message_size = '24kB';} ],
	[ 'no_workers', q{solver => 'cg', workers => 0} ],
	[ 'workers_only', q{solver => 'cholesky'}, '', 'parallel_leader_participation = off' ])
{
	my ($name, $args, $set, $on_shards) = @$case;
	$set //= '';
	for my $node (@shards)
	{
		$node->safe_psql('postgres', $on_shards ? "ALTER SYSTEM SET $on_shards" : 'ALTER SYSTEM RESET ALL');
		$node->reload;
	}
	my ($ret, $stdout, $stderr) = $coord->psql(
		'postgres', qq{SET client_min_messages = notice; $set
		  SELECT device, iterations, users, items, ratings FROM wals_train('ratings', 'user_id',
		    'item_id', 'rating', model => 's_$name', factors => 8, iterations => 3, $args)});
	is($ret, 0, "$name: trained on the shards") or diag($stderr);
	like($stdout, qr/^shards\|3\|1500\|300\|/, "$name: the summary says shards");
	like($stderr, qr/NOTICE:  training model "public.s_$name" on 2 shards: servers "shard0", "shard1"/,
		"$name: a NOTICE names the servers");
	my $workers = $args =~ /workers => 0/ ? '0, 0' : '1, 1';
	like($stderr, qr/solved with $workers parallel workers/,
		"$name: each shard solved with its max_parallel_maintenance_workers, or workers => 0");
	$coord->safe_psql(
		'postgres', qq{SELECT * FROM wals_train('ratings_here', 'user_id', 'item_id', 'rating',
		  model => 'h_$name', factors => 8, iterations => 3, $args)});
	same_model($coord, "s_$name", "h_$name", $name, 3);
}

# ---------------------------------------------------------------------------
# One shard holding every row: its factors stay there until the end, when
# they come here once.
$shards[0]->safe_psql('postgres',
	q{CREATE TABLE ratings_all (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)});
$coord->safe_psql(
	'postgres', q{
CREATE TABLE ratings_one (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)
  PARTITION BY HASH (user_id);
CREATE FOREIGN TABLE ratings_one_0 PARTITION OF ratings_one
  FOR VALUES WITH (MODULUS 1, REMAINDER 0) SERVER shard0 OPTIONS (table_name 'ratings_all');
INSERT INTO ratings_one SELECT * FROM ratings_here;
});
is( $coord->safe_psql(
		'postgres', q{SELECT device, iterations FROM wals_train('ratings_one', 'user_id',
		  'item_id', 'rating', model => 's_one', factors => 8, iterations => 3, solver => 'cg')}),
	'shards|3', 'one shard: trained there');
same_model($coord, 's_one', 'h_cg', 'one shard', 3);

# ---------------------------------------------------------------------------
# One shard whose partition is empty: it holds no rows and owns no user,
# but owns items as any shard does, whose cells come from the other, and
# the model is the one server's.  With every partition empty there is
# nothing to train on.
for my $node (@shards)
{
	$node->safe_psql('postgres',
		q{CREATE TABLE ratings_none (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)});
}
$coord->safe_psql(
	'postgres', q{
CREATE TABLE ratings_gap (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)
  PARTITION BY RANGE (user_id);
CREATE FOREIGN TABLE ratings_gap_0 PARTITION OF ratings_gap
  FOR VALUES FROM (MINVALUE) TO (100000) SERVER shard0 OPTIONS (table_name 'ratings_all');
CREATE FOREIGN TABLE ratings_gap_1 PARTITION OF ratings_gap
  FOR VALUES FROM (100000) TO (MAXVALUE) SERVER shard1 OPTIONS (table_name 'ratings_none');
CREATE TABLE ratings_void (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)
  PARTITION BY RANGE (user_id);
CREATE FOREIGN TABLE ratings_void_0 PARTITION OF ratings_void
  FOR VALUES FROM (MINVALUE) TO (100000) SERVER shard0 OPTIONS (table_name 'ratings_none');
CREATE FOREIGN TABLE ratings_void_1 PARTITION OF ratings_void
  FOR VALUES FROM (100000) TO (MAXVALUE) SERVER shard1 OPTIONS (table_name 'ratings_none');
});
my ($ret, $stdout, $stderr) = $coord->psql(
	'postgres', q{SET client_min_messages = notice;
	  SELECT device, iterations, users, items FROM wals_train('ratings_gap', 'user_id', 'item_id',
	    'rating', model => 's_gap', factors => 8, iterations => 3, solver => 'cg')});
is($stdout, 'shards|3|1500|300', 'an empty shard: trained on both shards') or diag($stderr);
like($stderr, qr/NOTICE:  training model "public.s_gap" on 2 shards: servers "shard0", "shard1"/,
	'an empty shard: the empty one is a shard of the training');
same_model($coord, 's_gap', 'h_cg', 'an empty shard', 3);
($ret, $stdout, $stderr) = $coord->psql(
	'postgres', q{\set VERBOSITY verbose
	  SELECT * FROM wals_train('ratings_void', 'user_id', 'item_id', 'rating', model => 's_void',
	    factors => 8)});
like($stderr, qr/ERROR:  22023: relation "ratings_void" given as "source" has no ratings/,
	'every shard empty: nothing to train on, a clean error');

# ---------------------------------------------------------------------------
# A row that cannot be solved: the error of one server, from the shard
# that owns the row, which it names; the model trained before stays.  The
# shards still leave every row to their parallel workers, so a worker
# finds it.
my $before = unsolvable_row($coord, 'shard[01]', "the shard's server");

# In a transaction block the training reads the shards here, through
# postgres_fdw, which alone shows what the block wrote there: a failure
# caught in a PL/pgSQL EXCEPTION block, the row deleted in the block, and
# the next training, which would fail on the row if it read the shards
# on connections of its own.
($ret, $stdout, $stderr) = $coord->psql(
	'postgres', q{SET client_min_messages = notice;
BEGIN;
DO $$
BEGIN
  PERFORM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 's_retry',
    factors => 8, alpha => 1e6, solver => 'cholesky');
EXCEPTION WHEN invalid_parameter_value THEN
  RAISE WARNING 'caught: %', SQLERRM;
END $$;
DELETE FROM ratings WHERE rating > 1e30;
SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 's_retry',
  factors => 8);
COMMIT;});
like($stderr, qr/WARNING:  caught: could not solve the factors of user 77/,
	'a failure in an EXCEPTION block is caught there');
like($stderr, qr/NOTICE:  model "public.s_retry" trains here, reading "ratings" through postgres_fdw/,
	'in a transaction block the training reads the shards through postgres_fdw');
is($stdout, 'cpu', 'and sees the row the block deleted there') or diag($stderr);
$coord->safe_psql('postgres', q{DELETE FROM ratings WHERE rating > 1e30});

# ---------------------------------------------------------------------------
# A shard without wals: an error before anything is read.
$shards[1]->safe_psql('postgres', 'DROP EXTENSION wals');
($ret, $stdout, $stderr) = $coord->psql(
	'postgres', q{SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	  model => 's_cg', factors => 8)});
like($stderr, qr/ERROR:  extension "wals" is not installed on server "shard1"/,
	'a shard without wals is refused, by name');
is($coord->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 's_cg'}),
	$before, 'and the model stays');
$shards[1]->safe_psql('postgres', 'CREATE EXTENSION wals');

# ---------------------------------------------------------------------------
# A cancel on the coordinator stops the shards, and leaves nothing there:
# the same session trains again at once.
my $bg = $coord->background_psql('postgres', on_error_stop => 0, timeout => 120);
$bg->set_query_timer_restart;
my $pid = $bg->query_safe('SELECT pg_backend_pid()');

cancel_training($coord, $bg, $pid);
for my $k (0, 1)
{
	ok($shards[$k]->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_activity'
			. q{ WHERE query LIKE '%wals_shard_%' AND state = 'active' AND pid <> pg_backend_pid()}),
		"shard $k runs nothing of the cancelled training");
}
is($coord->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 's_cg'}),
	$before, 'the cancelled training left the model as it was');
like($bg->query_safe(q{SELECT device, iterations FROM wals_train('ratings', 'user_id', 'item_id',
	'rating', model => 's_again', factors => 8, iterations => 2)}),
	qr/^shards\|2$/, 'the same session trains on the shards again');

# A shard's own backend cancelled there: the training ends with that
# error, naming the server.
# A cancel that reaches the shard between two calls is dropped there, as
# any cancel of an idle backend: cancel what runs until one takes, which
# the training's backend shows by no longer being active (its query keeps
# the last progress it reported).
start_long_training($coord, $bg, $pid);
my $cancelled = 0;
for my $try (1 .. 200)
{
	$shards[0]->safe_psql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity
	  WHERE query LIKE '%wals_shard_solve%' AND state = 'active' AND pid <> pg_backend_pid()});
	last if $coord->safe_psql('postgres',
		"SELECT state <> 'active' FROM pg_stat_activity WHERE pid = $pid") eq 't';
	Time::HiRes::usleep(100_000);
}
$cancelled = eval {
	pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr},
		qr/ERROR:  canceling statement due to user request.*CONTEXT:.*shard on server "shard0"/s);
};
ok($cancelled, 'a cancel on a shard ends the training with its error, naming the server')
  or diag("stderr: $bg->{stderr}");
$bg->{stderr} = '';
is($coord->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 's_cg'}),
	$before, 'the model stays as it was after a cancel on a shard');

# A shard that goes away in the middle: an error naming it.
lose_shard($coord, $bg, $pid, $shards[1], 'shard1');
is($coord->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 's_cg'}),
	$before, 'the model stays as it was');

# ---------------------------------------------------------------------------
# An ordinary role: SELECT on the source is checked here, the connection
# is postgres_fdw's for the role's own user mapping (a password is needed
# unless a superuser waived it), and the shard reads as the role the
# mapping names, with its privileges there.
$coord->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
GRANT USAGE ON FOREIGN SERVER shard0, shard1 TO alice;
});
for my $k (0, 1)
{
	$shards[$k]->safe_psql('postgres', q{CREATE ROLE reader LOGIN});
}
sub as_alice
{
	my ($args) = @_;
	return $coord->psql(
		'postgres', qq{SET ROLE alice;
		  SELECT device FROM wals_train('public.ratings', 'user_id', 'item_id', 'rating',
		    model => 'alice.m', factors => 8, iterations => 2 $args)});
}
($ret, $stdout, $stderr) = as_alice('');
like($stderr, qr/ERROR:  permission denied for table ratings/,
	'a role without SELECT on the source is refused');
$coord->safe_psql('postgres', q{GRANT SELECT ON ratings TO alice});
($ret, $stdout, $stderr) = as_alice('');
like($stderr, qr/ERROR:  user mapping not found for (user )?"alice"/,
	'a role without a user mapping gets postgres_fdw\'s error');
$coord->safe_psql('postgres', q{
CREATE USER MAPPING FOR alice SERVER shard0 OPTIONS (user 'reader');
CREATE USER MAPPING FOR alice SERVER shard1 OPTIONS (user 'reader');
});
($ret, $stdout, $stderr) = as_alice('');
like($stderr, qr/ERROR:  password is required/,
	'a role whose mapping has no password is refused, as postgres_fdw refuses it');
$coord->safe_psql('postgres', q{
ALTER USER MAPPING FOR alice SERVER shard0 OPTIONS (ADD password_required 'false');
ALTER USER MAPPING FOR alice SERVER shard1 OPTIONS (ADD password_required 'false');
});
($ret, $stdout, $stderr) = as_alice('');
like($stderr, qr/ERROR:  permission denied for function wals_shard_load.*shard on server "shard0"/s,
	'a shard refuses a mapped role it has not made a peer of sharded trainings');
for my $k (0, 1)
{
	$shards[$k]->safe_psql('postgres', q{CREATE ROLE wals_shard_peer NOLOGIN});
	grant_shard_functions($shards[$k], 'wals_shard_peer');
	$shards[$k]->safe_psql('postgres', q{GRANT wals_shard_peer TO reader});
}
($ret, $stdout, $stderr) = as_alice('');
like($stderr, qr/ERROR:  permission denied for table ratings_part.*shard on server "shard0"/s,
	'the shard reads as the mapped role, which may not read there');
for my $k (0, 1)
{
	$shards[$k]->safe_psql('postgres', q{GRANT SELECT ON ratings_part TO reader});
}
($ret, $stdout, $stderr) = as_alice('');
is($stdout, 'shards', 'with SELECT there, the role trains on the shards') or diag($stderr);
is($coord->safe_psql('postgres', q{SELECT pg_get_userbyid(relowner) FROM pg_class
	WHERE oid = 'alice.m_user_factors'::regclass}), 'alice', 'and owns the model');

# The grants alice gave an app role stay through a sharded retraining, warm
# and cold, and the app serves the new model.
$coord->safe_psql('postgres', q{
CREATE ROLE app LOGIN;
SET ROLE alice;
GRANT USAGE ON SCHEMA alice TO app;
GRANT SELECT ON alice.m_user_factors, alice.m_item_factors TO app;
});
for my $warm ('false', 'true')
{
	($ret, $stdout, $stderr) = $coord->psql('postgres', qq{SET ROLE alice;
	  SELECT device FROM wals_retrain('alice.m', warm_start => $warm)});
	is($stdout, 'shards', "alice retrains the sharded model (warm_start => $warm)")
	  or diag($stderr);
	($ret, $stdout, $stderr) = $coord->psql('postgres', q{SET ROLE app;
	  SELECT count(*) FROM wals_recommend(1, 5, 'alice.m')});
	is($stdout, '5', "the app still serves it (warm_start => $warm)") or diag($stderr);
}

# ---------------------------------------------------------------------------
# What a sharded training refuses.
for my $refused ([ q{accelerate => 'ncg'}, 'accelerate' ], [ q{validation => 0.1}, 'a validation' ])
{
	($ret, $stdout, $stderr) = $coord->psql(
		'postgres', qq{SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
		  model => 's_cg', factors => 8, $refused->[0])});
	like($stderr, qr/ERROR:  .* is not supported with a sharded source/,
		"$refused->[1] is refused with a sharded source");
}

done_testing();
