
# wals_tune_concurrently lets VACUUM's horizon move: a row deleted while
# it runs is removable once a later trial has begun, where wals_tune, one
# statement, keeps it until its end.  A cancel part-way leaves the trials
# committed so far in the log, no model and no progress row.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Poll;

my $node = PostgreSQL::Test::Cluster->new('tune_concurrently');
$node->init;
$node->append_conf('postgresql.conf', "client_min_messages = warning\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE ROLE alice LOGIN;
GRANT CREATE ON SCHEMA public TO alice;
SET ROLE alice;
CREATE TABLE big AS
  SELECT u AS user_id, (u * 7 + g * 13) % 2000 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 20000) u, generate_series(1, 50) g;
RESET ROLE;
CREATE TABLE junk (id int);
});

my $bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 300,
	extra_params => [ '-U', 'alice' ]);
my $pid = $bg->query_safe('SELECT pg_backend_pid()');

# The trial the tuning of $pid is at, from wals_progress.
sub trial
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(trial), 0) FROM wals_progress WHERE pid = $pid");
}

# Delete a row while the tuning is at some trial; once it has gone $later
# trials further (or ended), VACUUM junk: whether the row was removed.
sub removed_after
{
	my ($later) = @_;
	$node->safe_psql('postgres', 'INSERT INTO junk VALUES (1); DELETE FROM junk');
	my $at = trial();
	my $target = $at + $later;
	ok(wait_until($node, 'postgres',
		qq{(SELECT coalesce(max(trial), 0) >= $target FROM wals_progress WHERE pid = $pid)}),
		"the tuning reached trial $target");
	my ($ret, $stdout, $stderr) = $node->psql('postgres', 'VACUUM (VERBOSE) junk');
	return $stderr =~ /tuples: 1 removed/ ? 1
	  : $stderr =~ /1 are dead but not yet removable/ ? 0
	  : die "VACUUM said: $stderr";
}

# ---------------------------------------------------------------------------
# wals_tune_concurrently: a trial a transaction.
$bg->query_until(qr/starting/, q{\echo starting
CALL wals_tune_concurrently('big', 'user_id', 'item_id', 'rating', model => 'c',
  space => '{"factors": [8]}', budget => '1 hour', max_trials => 8);
\echo called
});
ok(wait_until($node, 'postgres', qq{(SELECT trial >= 2 FROM wals_progress WHERE pid = $pid)}),
	'the procedure reached its second trial');
is(removed_after(2), 1, 'a row deleted during a trial is removable two trials later');
$bg->query_until(qr/called/, '');
is( $node->safe_psql(
		'postgres', q{SELECT count(*), count(*) FILTER (WHERE chosen),
		  count(DISTINCT xmin::text) FROM wals_tuning_log WHERE model = 'c'}),
	'8|1|8', 'eight trials logged, one chosen, each committed on its own');
is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_models WHERE model = 'c'}),
	'1', 'and the model stored');

# ---------------------------------------------------------------------------
# wals_tune: one statement, one snapshot.
$bg->query_until(qr/starting/, q{\echo starting
SELECT count(*) FROM wals_tune('big', 'user_id', 'item_id', 'rating', model => 'f',
  space => '{"factors": [8]}', budget => '1 hour', max_trials => 8);
\echo selected
});
ok(wait_until($node, 'postgres', qq{(SELECT trial >= 2 FROM wals_progress WHERE pid = $pid)}),
	'the function reached its second trial');
is(removed_after(2), 0, 'a row deleted during its trial is still not removable two trials later');
$bg->query_until(qr/selected/, '');

# ---------------------------------------------------------------------------
# A cancel part-way.
$bg->query_until(qr/starting/, q{\echo starting
CALL wals_tune_concurrently('big', 'user_id', 'item_id', 'rating', model => 'x',
  space => '{"factors": [8]}', budget => '1 hour');
});
ok(wait_until($node, 'postgres', qq{(SELECT trial >= 3 FROM wals_progress WHERE pid = $pid)}),
	'the procedure reached its third trial');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr},
	qr/canceling statement due to user request/);
ok(wait_until($node, 'postgres', "(SELECT state = 'idle' FROM pg_stat_activity WHERE pid = $pid)"),
	'the cancelled backend is idle');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) >= 2, count(*) FILTER (WHERE chosen)
		  FROM wals_tuning_log WHERE model = 'x'}),
	't|0', 'the trials committed before the cancel stay in the log, none chosen');
is( $node->safe_psql(
		'postgres', q{SELECT (SELECT count(*) FROM wals_models WHERE model LIKE 'x%'),
		  (SELECT count(*) FROM wals_progress)}),
	'0|0', 'no model, and no progress row');

$bg->quit;
$node->stop;
done_testing();
