
# wals_progress: a training, a tuning and a refresh each show a row while
# they run, with their phase, iteration, rows and trial; the rows go on
# between two looks a second and a half apart; another role sees the pid
# and nothing else, a member of pg_read_all_stats everything; a cancelled
# training leaves no row.  A source read through a view whose function
# looks at the view itself shows the phase of reading, in a training and
# in a refresh.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Poll;

my $node = PostgreSQL::Test::Cluster->new('progress');
$node->init;
$node->append_conf('postgresql.conf', "client_min_messages = warning\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE ROLE watcher LOGIN IN ROLE pg_read_all_stats;
GRANT CREATE ON SCHEMA public TO alice;
SET ROLE alice;
CREATE TABLE big AS
  SELECT u AS user_id, (u * 7 + g * 13) % 2000 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 20000) u, generate_series(1, 50) g;
});

my $bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 180,
	extra_params => [ '-U', 'alice' ]);
my $pid = $bg->query_safe('SELECT pg_backend_pid()');

sub as
{
	my ($role, $sql) = @_;
	return $node->safe_psql('postgres', $sql, extra_params => [ '-U', $role ]);
}

sub cancel
{
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr},
		qr/canceling statement due to user request/);
	$bg->{stderr} = '';
	$bg->{stdout} = '';
	ok(wait_until($node, 'postgres', "(SELECT state = 'idle' FROM pg_stat_activity WHERE pid = $pid)"),
		'the cancelled backend is idle');
}

is(as('alice', 'SELECT count(*) FROM wals_progress'), '0', 'nothing under way, no row');

# ---------------------------------------------------------------------------
# A training, seen by its role.
$bg->query_until(qr/starting/, q{\echo starting
SELECT * FROM wals_train('big', 'user_id', 'item_id', 'rating', model => 'm', factors => 128,
  iterations => 10000, solver => 'cholesky', replace => true);
});
ok( wait_until(
		$node, 'postgres', qq{EXISTS (SELECT FROM wals_progress WHERE pid = $pid
		  AND phase IN ('solving user factors', 'solving item factors') AND rows_total > 0)}),
	'the training shows a half-sweep');
my $row = as('alice',
	qq{SELECT datname, command, model, iteration BETWEEN 1 AND 10000, iterations,
	  rows_done BETWEEN 0 AND rows_total, rows_total IN (2000, 20000), trial, trials, budget_s,
	  elapsed_s > 0
	  FROM wals_progress WHERE pid = $pid});
is($row, 'postgres|train|public.m|t|10000|t|t||||t',
	'its role sees the database, command, model, iteration, rows and time');

my $look = qq{SELECT iteration, phase, rows_done FROM wals_progress WHERE pid = $pid};
my $first = as('alice', $look);
sleep 1.5;
isnt(as('alice', $look), $first, 'a second and a half later the training has gone on');

is(as('bob', qq{SELECT pid, datname, command, model, phase, iteration, rows_done
	FROM wals_progress WHERE pid = $pid}),
	"$pid|postgres|||||", 'another role sees the pid and the database, nothing else');
is(as('watcher', qq{SELECT command, model FROM wals_progress WHERE pid = $pid}),
	'train|public.m', 'a member of pg_read_all_stats sees everything');

cancel();
is(as('alice', 'SELECT count(*) FROM wals_progress'), '0', 'a cancelled training leaves no row');

# ---------------------------------------------------------------------------
# A tuning: the tuned model, its trial, trials and budget.
$bg->query_until(qr/starting/, q{\echo starting
SELECT * FROM wals_tune('big', 'user_id', 'item_id', 'rating', model => 'm',
  space => '{"factors": [8]}', budget => '1 hour');
});
ok( wait_until(
		$node, 'postgres', qq{EXISTS (SELECT FROM wals_progress WHERE pid = $pid
		  AND command = 'tune' AND trial >= 1 AND iteration >= 1)}),
	'the tuning shows a trial');
is( as('alice',
		qq{SELECT command, model, trial BETWEEN 1 AND 1000, trials, budget_s,
		  budget_used BETWEEN 0 AND 1, iterations IS NOT NULL
		  FROM wals_progress WHERE pid = $pid}),
	'tune|public.m|t|1000|3600|t|t',
	'the tuned model, the trial of 1000 at most, the budget and how much of it is used');
cancel();
is(as('alice', 'SELECT count(*) FROM wals_progress'), '0', 'a cancelled tuning leaves no row');

# ---------------------------------------------------------------------------
# From inside: a source whose view calls a function that reports what
# wals_progress shows of its own backend while a row of it is read.
as(
	'alice', q{
CREATE TABLE small (user_id bigint, item_id bigint, ts bigint);
INSERT INTO small SELECT u, (u * 7 + g) % 50 + 1, 1 FROM generate_series(1, 300) u,
  generate_series(1, 5) g;
CREATE FUNCTION look(u bigint, i bigint) RETURNS bool LANGUAGE plpgsql
  SET search_path = public AS $$
BEGIN
  IF u = 1 AND i = (SELECT min(item_id) FROM small WHERE user_id = 1) THEN
    -- the backends' states are read once a transaction, unless cleared
    PERFORM pg_stat_clear_snapshot();
    RAISE WARNING 'seen: %', (SELECT string_agg(command || ', ' || model || ', ' || phase
      || ', rows ' || coalesce(rows_done::text, 'none') || ' of ' || coalesce(rows_total::text, 'none'), '; ')
      FROM wals_progress WHERE pid = pg_backend_pid());
  END IF;
  RETURN true;
END $$;
CREATE VIEW small_v AS SELECT * FROM small WHERE look(user_id, item_id);
});
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	q{SELECT count(*) FROM wals_train('small_v', 'user_id', 'item_id', model => 's',
	  factors => 4, iterations => 2, changed_col => 'ts')},
	extra_params => [ '-U', 'alice' ]);
like($stderr, qr/seen: train, public\.s, reading the source, rows \d+ of none$/m,
	'a training shows itself reading its source, the rows read of a total it does not know');
as('alice', q{INSERT INTO small VALUES (1, 49, 2)});
($ret, $stdout, $stderr) = $node->psql('postgres', q{SELECT count(*) FROM wals_refresh('s')},
	extra_params => [ '-U', 'alice' ]);
like($stderr, qr/seen: refresh, public\.s, reading the changed ratings, rows none of none$/m,
	'a refresh shows itself reading the changed ratings');
is(as('alice', 'SELECT count(*) FROM wals_progress'), '0', 'and neither leaves a row');

$bg->quit;
$node->stop;
done_testing();
