
# What the sharded training tests (012_shards.pl, 013_citus.pl, and
# 021_pg_upgrade.pl for its sharded model) make and check alike: a source
# partitioned over postgres_fdw, a model trained on the shards against
# the same rows trained on the coordinator, a row that cannot be solved,
# and a long training that a cancel or a shard going away ends.
package ShardTest;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(same_model unsolvable_row start_long_training cancel_training lose_shard
  grant_shard_functions fdw_partitions);

# The functions a coordinator calls on a shard, which no role may call
# until a DBA grants them (doc/sharding.md).
my $shard_functions = join(', ',
	map { "wals_shard_$_" }
	  qw(load ids id_page plan plan_page route outbox inbox start put solve take loss rated end));

# EXECUTE on the shard functions of $node to the role $to, as doc/sharding.md
# has a DBA grant it; $before runs first in the same session.
sub grant_shard_functions
{
	my ($node, $to, $before) = @_;
	$node->safe_psql('postgres',
		($before // '') . "GRANT EXECUTE ON FUNCTION $shard_functions TO $to;");
}

# The SQL that makes the coordinator's table ratings, partitioned by hash
# of user_id over one postgres_fdw foreign table on each node of @shards
# (its table ratings_part), reached as the current user.
sub fdw_partitions
{
	my @shards = @_;
	my $sql = q{
CREATE TABLE ratings (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL)
  PARTITION BY HASH (user_id);
};
	my $n = @shards;
	for my $k (0 .. $#shards)
	{
		my ($host, $port) = ($shards[$k]->host, $shards[$k]->port);
		$sql .= qq{
CREATE SERVER shard$k FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host '$host', port '$port', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER shard$k;
CREATE FOREIGN TABLE ratings_$k PARTITION OF ratings
  FOR VALUES WITH (MODULUS $n, REMAINDER $k) SERVER shard$k
  OPTIONS (table_name 'ratings_part');
};
	}
	return $sql;
}

# Models $s (on the shards) and $h (here) of $node, trained from the same
# rows and seed for $iterations: every iteration's loss within 1e-5, the
# same factors up to the order of the sums, the same rated items kept for
# serving, the same recommendations.
sub same_model
{
	my ($node, $s, $h, $name, $iterations) = @_;
	$iterations //= 5;
	is( $node->safe_psql(
			'postgres', qq{
SELECT string_agg(s.iteration::text, ',' ORDER BY s.iteration)
FROM wals_training_log s JOIN wals_training_log h USING (iteration)
WHERE (s.model, h.model) = ('$s', '$h') AND abs(s.loss - h.loss) <= 1e-5 * h.loss}),
		join(',', 1 .. $iterations),
		"$name: every iteration's loss within 1e-5 of the training on one server");
	for my $side ('item', 'user')
	{
		is( $node->safe_psql(
				'postgres', qq{
SELECT max(abs(s - h)) < 1e-3
FROM ${s}_${side}_factors a JOIN ${h}_${side}_factors b USING (${side}_id),
     unnest(a.factors, b.factors) AS t(s, h)}),
			't', "$name: the same $side factors");
	}
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM ${s}_user_factors a JOIN ${h}_user_factors b USING (user_id)
WHERE a.rated <> b.rated}),
		'0', "$name: the same rated items kept for serving");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM wals_recommend(7, 5, '$s') s
  FULL JOIN wals_recommend(7, 5, '$h') h USING (item_id)
WHERE s.item_id IS NULL OR h.item_id IS NULL}),
		'0', "$name: the same recommendations");
}

# A row of the table ratings that cannot be solved, inserted on $node and
# left there: training model s_cg fails with the error of one server, from
# the shard that owns the row, named as $server matches it ($shard says
# what it is), and the model trained before stays, which is returned.
sub unsolvable_row
{
	my ($node, $server, $shard) = @_;
	my $before = $node->safe_psql('postgres',
		q{SELECT version, loss FROM wals_models WHERE model = 's_cg'});
	$node->safe_psql('postgres', q{INSERT INTO ratings VALUES (77, 5, 1e38)});
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres', q{\set VERBOSITY verbose
		  SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 's_cg',
		    factors => 8, alpha => 1e6, solver => 'cholesky')});
	like($stderr,
		qr/ERROR:  22023: could not solve the factors of user 77 while training model "public.s_cg", iteration 1/,
		'a row that cannot be solved is the error of one server');
	like($stderr, qr/CONTEXT:.*shard on server "$server"/s, "naming $shard");
	is($node->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 's_cg'}),
		$before, 'the previous model survives');
	return $before;
}

# Start training model s_cg of the table ratings on the shards, for long,
# in $bg (the background psql of backend $pid on $node), and wait until
# pg_stat_activity shows it iterating.
sub start_long_training
{
	my ($node, $bg, $pid) = @_;
	$bg->query_until(qr/starting/, q{\echo starting
SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
  model => 's_cg', factors => 8, iterations => 10000);
});
	ok( $node->poll_query_until(
			'postgres', qq{SELECT query LIKE 'wals_train: model "public.s_cg", iteration % of 10000%'
			  FROM pg_stat_activity WHERE pid = $pid}),
		'pg_stat_activity shows the sharded training\'s progress');
}

# A long training cancelled on the coordinator: it ends with the cancel's
# error.
sub cancel_training
{
	my ($node, $bg, $pid) = @_;
	start_long_training($node, $bg, $pid);
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	ok( eval {
			pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr},
				qr/canceling statement due to user request/);
		},
		'the sharded training ends on a cancel') or diag("stderr: $bg->{stderr}; $@");
	$bg->{stderr} = '';
}

# A long training whose shard $shard (a cluster) stops in the middle: it
# ends with an error naming the server $server; $bg is done with, and the
# shard starts again.
sub lose_shard
{
	my ($node, $bg, $pid, $shard, $server) = @_;
	start_long_training($node, $bg, $pid);
	$shard->stop('immediate');
	ok( eval {
			pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr},
				qr/ERROR:  (server closed the connection unexpectedly|could not send wals_shard_\w+\(\) to the shard on server "\Q$server\E").*CONTEXT:.*shard on server "\Q$server\E"/s
			);
		},
		'a shard that goes away ends the training with an error naming its server')
	  or diag("stderr: $bg->{stderr}; $@");
	$bg->quit;
	$shard->start;
}

1;
