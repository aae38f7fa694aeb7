
# Cancelling a training: pg_cancel_backend, statement_timeout, a rollback and
# an error late in the store phase all leave the previous model serving, with
# the same factors, recommendations and version.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
# Background sessions treat any stderr as a failure: keep the per-iteration
# NOTICEs of trainings out of it.
$node->append_conf('postgresql.conf', 'client_min_messages = warning');
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
-- small: the model whose survival is checked
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 500 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 2000) u, generate_series(1, 20) g;
-- large: a training of it with these parameters runs for hours
CREATE TABLE big AS
  SELECT u AS user_id, (u * 7 + g * 13) % 2000 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 20000) u, generate_series(1, 50) g;
ANALYZE ratings, big;
});

my $long_training = q{SELECT * FROM wals_train('big', 'user_id', 'item_id', 'rating',
  model => 'm', factors => 128, iterations => 10000, solver => 'cholesky', replace => true)};

$node->safe_psql('postgres',
	q{SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	  model => 'm', factors => 16, iterations => 5)});

# Everything that identifies the stored model "m".
sub recommendations
{
	my ($session) = @_;
	my $sql = q{SELECT u, r.ord, r.item_id, r.score
	  FROM generate_series(1, 10) u,
	       LATERAL wals_recommend(u, 5, 'm') WITH ORDINALITY r(item_id, score, ord)
	  ORDER BY u, r.ord};
	return ref($session)
	  ? $session->query_safe($sql)
	  : $node->safe_psql('postgres', $sql);
}

sub model_state
{
	return $node->safe_psql(
		'postgres', q{
SELECT version, trained_at, source, factors, users, items, loss FROM wals_models WHERE model = 'm';
SELECT count(*), max(version) FROM wals_training_log WHERE model = 'm';
SELECT md5(string_agg(user_id || ':' || factors::text, ',' ORDER BY user_id)) FROM m_user_factors;
SELECT md5(string_agg(item_id || ':' || factors::text, ',' ORDER BY item_id)) FROM m_item_factors;
SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class WHERE relname LIKE 'm\_%';
SELECT round(wals_predict(3, 100, 'm')::numeric, 6);
});
}

my $recs = recommendations();
my $state = model_state();
my ($version) = $node->safe_psql('postgres',
	q{SELECT version FROM wals_models WHERE model = 'm'});
like($recs, qr/^1\|1\|\d+\|/, 'the first model serves recommendations');
my @lines = split /\n/, $recs;
is(scalar @lines, 50, '5 recommendations for each of 10 users');

sub model_unchanged
{
	my ($what) = @_;
	is(recommendations(), $recs,
		"$what: the previous model serves the same recommendations");
	is(model_state(), $state,
		"$what: catalog row, version, log and factor tables unchanged");
}

# ---------------------------------------------------------------------------
# pg_cancel_backend during a long training.
my $bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 120);
$bg->set_query_timer_restart;
my $pid = $bg->query_safe('SELECT pg_backend_pid()');
# this backend has served the model before, so it caches its item factors
is(recommendations($bg), $recs, 'background session sees the model');

$bg->query_until(qr/starting/, "\\echo starting\n$long_training;\n");
ok( $node->poll_query_until(
		'postgres', qq{SELECT state = 'active' AND query LIKE '%wals_train%'
		  AND now() - query_start > interval '1.5 seconds'
		  FROM pg_stat_activity WHERE pid = $pid}),
	'the long training is running');

my $start = time;
is($node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)"),
	't', 'pg_cancel_backend');
my $seen = eval {
	pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr},
		qr/canceling statement due to user request/);
};
my $elapsed = time - $start;
note("the cancelled training ended after $elapsed s");
ok($seen, 'the training ends with "canceling statement due to user request"')
  or diag("stderr: $bg->{stderr}; $@");
cmp_ok($elapsed, '<', 30, 'the training ends after the cancel, not hung (the time is noted above)')
  or diag("it took $elapsed s");
$bg->{stderr} = '';
$bg->{stdout} = '';
# The error reaches the client before the backend has finished its abort
# and reported itself idle.
ok( $node->poll_query_until(
		'postgres', "SELECT state = 'idle' FROM pg_stat_activity WHERE pid = $pid"),
	'the cancelled backend is idle');
model_unchanged('after pg_cancel_backend');
is(recommendations($bg), $recs,
	'the cancelled session itself serves the previous model');

# ---------------------------------------------------------------------------
# statement_timeout, during the sweeps (1 s) and during the ingest (100 ms).
for my $timeout ('1s', '100ms')
{
	my ($stdout, $stderr);
	$start = time;
	$node->psql(
		'postgres', "SET statement_timeout = '$timeout'; $long_training",
		stdout => \$stdout,
		stderr => \$stderr);
	$elapsed = time - $start;
	note("statement_timeout $timeout: the training ended after $elapsed s");
	like(
		$stderr,
		qr/canceling statement due to statement timeout/,
		"statement_timeout $timeout ends the training");
	cmp_ok($elapsed, '<', 30,
		"statement_timeout $timeout: the training ends, not hung")
	  or diag("it took $elapsed s");
	model_unchanged("after statement_timeout $timeout");
}

# ---------------------------------------------------------------------------
# The same inside an accelerated training (ALS-NCG): a cancel once it is past
# its first iteration, where the sweep, line search and step along the NCG
# direction all run on the factors of the iteration before; then
# statement_timeout.
my $long_ncg = q{SELECT * FROM wals_train('big', 'user_id', 'item_id', 'rating',
  model => 'm', factors => 128, iterations => 10000, solver => 'cholesky',
  accelerate => 'ncg', replace => true)};
# Start $sql in the background session, wait until pg_stat_activity shows
# it matching the regular expression $activity (test $shown), cancel it and
# wait for its error and for the backend to be idle again.  An iteration of
# the long trainings can take under 0.4 s, less than a poll on a loaded
# machine: the patterns accept any iteration from the one they need on.
sub cancel_when_shown
{
	my ($sql, $activity, $shown, $what) = @_;
	$bg->query_until(qr/starting/, "\\echo starting\n$sql;\n");
	ok( $node->poll_query_until(
			'postgres', qq{SELECT query ~ '$activity'
			  FROM pg_stat_activity WHERE pid = $pid}),
		$shown);
	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)"),
		't', "pg_cancel_backend of $what");
	my $seen = eval {
		pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr},
			qr/canceling statement due to user request/);
	};
	ok($seen, "$what ends with \"canceling statement due to user request\"")
	  or diag("stderr: $bg->{stderr}; $@");
	$bg->{stderr} = '';
	$bg->{stdout} = '';
	ok( $node->poll_query_until(
			'postgres', "SELECT state = 'idle' FROM pg_stat_activity WHERE pid = $pid"),
		'the cancelled backend is idle');
}

cancel_when_shown($long_ncg, 'iteration ([2-9]|[1-9][0-9]+) of 10000',
	'the accelerated training is past its first iteration', 'the accelerated training');
model_unchanged('after pg_cancel_backend in an accelerated iteration');

# wals_tune shows which trial it is in pg_stat_activity; cancelled there, it
# leaves the model, no trial model and no tuning log.  The session's next
# training shows no trace of the tuning.  Any trial after the first (the
# best so far shown) will do: a trial of 8 factors can be over between two
# polls of an assert-enabled server under load, and trial 2 missed.
cancel_when_shown(
	q{SELECT * FROM wals_tune('big', 'user_id', 'item_id', 'rating', model => 'm', space => '{"factors": [8]}', budget => '1 hour')},
	'^wals_tune: model m, trial [0-9]+, [0-9]+ s of 3600 s spent; best ndcg@20 .*: wals_train: model "public\\.m_trial", iteration ',
	'pg_stat_activity shows the trial of wals_tune and its training', 'wals_tune');
model_unchanged('after pg_cancel_backend in wals_tune');
is( $node->safe_psql(
		'postgres',
		q{SELECT (SELECT count(*) FROM wals_tuning_log)
		    + (SELECT count(*) FROM wals_models WHERE model = 'm_trial')}),
	'0', 'no tuning log and no trial model after a cancelled wals_tune');
cancel_when_shown($long_training, '^wals_train: model "public\\.m", iteration ([2-9]|[1-9][0-9]+) of ',
	'the next training of the session shows itself alone', 'that training');

# Run $sql under statement_timeout $timeout: it must end with the timeout's
# error and leave the model as it was.
sub times_out
{
	my ($timeout, $sql, $what) = @_;
	my ($stdout, $stderr);
	$node->psql(
		'postgres', "SET statement_timeout = '$timeout'; $sql",
		stdout => \$stdout,
		stderr => \$stderr);
	like(
		$stderr,
		qr/canceling statement due to statement timeout/,
		"statement_timeout ends $what");
	model_unchanged("after statement_timeout in $what");
}

times_out('4s', $long_ncg, 'an accelerated training');

# A training with a validation share, whose best iterate is kept apart from
# the factors being trained: the timeout keeps neither.
times_out(
	'3s', q{SELECT * FROM wals_train('big', 'user_id', 'item_id', 'rating', model => 'm',
  factors => 64, iterations => 10000, validation => 0.2, patience => 10000, replace => true)},
	'a training with a validation share');

# wals_tune, timed out in a trial after others have run: the model, its
# log and the tuning log are as they were; no trial model is left.
times_out(
	'5s', q{SELECT * FROM wals_tune('big', 'user_id', 'item_id', 'rating', model => 'm',
  space => '{"factors": [8, 64]}', budget => '1 hour')},
	'wals_tune');
is( $node->safe_psql(
		'postgres',
		q{SELECT (SELECT count(*) FROM wals_tuning_log)
		    + (SELECT count(*) FROM wals_models WHERE model = 'm_trial')}),
	'0', 'no tuning log and no trial model after a cancelled wals_tune');

# ---------------------------------------------------------------------------
# A successful training inside a transaction that is rolled back.
$bg->query_safe('BEGIN');
$bg->query_safe(
	q{SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	  model => 'm', factors => 8, iterations => 3, seed => 7, replace => true)});
my $inside = recommendations($bg);
isnt($inside, $recs, 'inside the transaction the new model serves');
cmp_ok($bg->query_safe(q{SELECT version FROM wals_models WHERE model = 'm'}),
	'>', $version, 'inside the transaction the version increased');
is($node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'm'}),
	$version, 'other sessions see the previous catalog row meanwhile');
# The transaction dropped the previous factor tables, so a reader either
# still reads them or waits for the commit: never anything else.
{
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		q{SET lock_timeout = '300ms';
		  SELECT u, r.ord, r.item_id, r.score
		  FROM generate_series(1, 10) u,
		       LATERAL wals_recommend(u, 5, 'm') WITH ORDINALITY r(item_id, score, ord)
		  ORDER BY u, r.ord});
	ok( ($ret == 0 && $stdout eq $recs)
		  || ($ret != 0 && $stderr =~ /canceling statement due to lock timeout/),
		'other sessions get the previous model or wait meanwhile')
	  or diag("ret $ret, stdout $stdout, stderr $stderr");
}
$bg->query_safe('ROLLBACK');
model_unchanged('after ROLLBACK');
is(recommendations($bg), $recs,
	'after ROLLBACK the same session serves the previous model again');

# ---------------------------------------------------------------------------
# An error late in the store phase: after the user factors were written
# again and the previous item factors deleted, writing the new item factors
# fails (a trigger the owner put on the item factor table raises when a test
# setting is on; a retraining writes into the model's own tables, whose
# triggers see every row).
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION fail_item_factors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_catalog.current_setting('wals_test.fail_store', true) = 'on' THEN
    RAISE EXCEPTION 'injected failure while storing item factors';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fail_item_factors BEFORE INSERT ON m_item_factors
  FOR EACH ROW EXECUTE FUNCTION fail_item_factors();
});
my ($ret, $stdout, $stderr) = $node->psql(
	'postgres',
	q{SET wals_test.fail_store = on;
	  SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	    model => 'm', factors => 8, iterations => 3, seed => 7, replace => true)});
like(
	$stderr,
	qr/injected failure while storing item factors/,
	'a training can fail while storing');
model_unchanged('after a failure in the store phase');
$bg->query_safe('SET wals_test.fail_store = on');
($stdout, $ret) = $bg->query(
	q{SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	    model => 'm', factors => 8, iterations => 3, seed => 7, replace => true)});
like($bg->{stderr}, qr/injected failure/,
	'the same failure in the session that cached the model');
$bg->{stderr} = '';
is(recommendations($bg), $recs,
	'that session serves the previous model after the failure');
model_unchanged('after the second failure in the store phase');

# ---------------------------------------------------------------------------
# The model can still be retrained after all this.
$node->safe_psql('postgres', q{DROP TRIGGER fail_item_factors ON m_item_factors});
$node->safe_psql('postgres',
	q{SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	  model => 'm', factors => 8, iterations => 3, seed => 7, replace => true)});
cmp_ok($node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'm'}),
	'>', $version, 'a later training replaces the model');
isnt(recommendations(), $recs, 'and serves new recommendations');
is(recommendations($bg), recommendations(),
	'the long-lived session sees the new model too');

$bg->quit;
$node->stop;
done_testing();
