
# Concurrency: readers during an uncommitted retraining see the previous
# model (or wait for the commit) and never a mixed one; after the commit they
# see the new one.  Two trainings of one model serialize, and the model left
# is the one of the last training, whole.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
# Background sessions treat any stderr as a failure: keep the per-iteration
# NOTICEs of trainings out of it.
$node->append_conf('postgresql.conf', 'client_min_messages = warning');
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 500 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 2000) u, generate_series(1, 20) g;
-- a training of it lasts a few tenths of a second
CREATE TABLE medium AS
  SELECT u AS user_id, (u * 7 + g * 13) % 2000 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 10000) u, generate_series(1, 50) g;
ANALYZE ratings, medium;
});

sub train_sql
{
	my ($seed, $source, $iterations) = @_;
	$source //= 'ratings';
	$iterations //= 5;
	return qq{SELECT model, users, items FROM wals_train('$source', 'user_id', 'item_id', 'rating',
	  model => 'c', factors => 16, iterations => $iterations, seed => $seed, replace => true)};
}

my $recs_sql = q{SELECT u, r.ord, r.item_id, r.score
  FROM generate_series(1, 10) u,
       LATERAL wals_recommend(u, 5, 'c') WITH ORDINALITY r(item_id, score, ord)
  ORDER BY u, r.ord};
my $version_sql = q{SELECT version FROM wals_models WHERE model = 'c'};

sub fresh_recs { return $node->safe_psql('postgres', $recs_sql); }
sub version    { return $node->safe_psql('postgres', $version_sql); }

# When the last query was sent, by the server's clock (send_query).
my $sent_at;

# Wait until backend $pid waits on a lock of type $event (true) or has
# finished its query (false).
sub pid_waits_on_lock
{
	my ($pid, $event) = @_;
	for (my $i = 0; $i < 1200; $i++)
	{
		my $s = $node->safe_psql(
			'postgres', qq{
SELECT CASE WHEN wait_event_type = 'Lock' AND wait_event = '$event' THEN 'waiting'
            WHEN state = 'idle' AND state_change > '$sent_at' THEN 'idle' ELSE 'busy' END
FROM pg_stat_activity WHERE pid = $pid});
		return 1 if $s eq 'waiting';
		return 0 if $s eq 'idle';
		Time::HiRes::usleep(50_000);
	}
	diag("backend $pid neither waits on a lock nor ends");
	return 0;
}

# Wait for the query sent with send_query to end, and return its output.
sub finish_query
{
	my ($session) = @_;
	my $ok = eval {
		pump_until($session->{run}, $session->{timeout}, \$session->{stdout},
			qr/^done\n/m);
	};
	my $out = $session->{stdout};
	$out =~ s/^done\n//m;
	chomp $out;
	my $err = $session->{stderr};
	$session->{stdout} = '';
	$session->{stderr} = '';
	diag("query did not finish: $@ $err") unless $ok;
	return ($out, $err);
}

# Send a query without waiting for it, then an \echo marking its end.  The
# server's clock just before is kept: the session counts as done with the
# query only once it went idle after that time, since psql may not even
# have sent it when query_until returns.
sub send_query
{
	my ($session, $sql) = @_;
	$sent_at = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	# What came with "sent" (a query that did not wait answers at once) is
	# kept for finish_query.
	my $got = $session->query_until(qr/sent/, "\\echo sent\n$sql;\n\\echo done\n");
	$got =~ s/^.*?sent\n//s;
	$session->{stdout} = $got;
}

my $sa = $node->background_psql('postgres', on_error_stop => 0, timeout => 120);
$sa->set_query_timer_restart;
my $sb = $node->background_psql('postgres', on_error_stop => 0, timeout => 120);
$_->set_query_timer_restart for ($sa, $sb);
my $a_pid = $sa->query_safe('SELECT pg_backend_pid()');
my $b_pid = $sb->query_safe('SELECT pg_backend_pid()');

# ---------------------------------------------------------------------------
# A reader during an uncommitted retraining.
$sa->query_safe(train_sql(1));
my $v1 = version();
my $old = fresh_recs();
is($sb->query_safe($recs_sql), $old, 'B sees the first model');

$sa->query_safe('BEGIN');
$sa->query_safe(train_sql(2));
my $new = $sa->query_safe($recs_sql);
isnt($new, $old, 'inside its transaction A sees the retrained model');
is($sb->query_safe($version_sql), $v1, 'B still sees the previous catalog row');

# With a lock timeout, B gets the previous model or waits (and gives up).
my ($out, $err) = $sb->query(qq{SET lock_timeout = '300ms'; $recs_sql});
$out =~ s/^SET\n//;
ok( ($err == 0 && $out eq $old)
	  || ($sb->{stderr} =~ /canceling statement due to lock timeout/),
	'during the retraining B gets the previous model or waits')
  or diag("B got: $out / $sb->{stderr}");
$sb->{stderr} = '';
$sb->query_safe('RESET lock_timeout');

# Without one, B's call may wait for A's commit; what it returns then must be
# the previous or the new model, whole.
send_query($sb, $recs_sql);
my $b_waited = pid_waits_on_lock($b_pid, 'relation');
note("B " . ($b_waited ? 'waits' : 'does not wait') . ' for A');
$sa->query_safe('COMMIT');
($out, $err) = finish_query($sb);
is($err, '', 'B\'s call during the commit raises no error');
{
	# B looked the model up in the catalog (previous version) before it
	# waited for A's lock on the factor tables; after A's commit it must take
	# the new version, not score new user factors against the item factors
	# it had cached for the previous one.
	ok($out eq $old || $out eq $new,
		'B\'s call during the commit returns the previous or the new model, not a mix')
	  or diag(
		"B got:\n$out\nprevious model:\n$old\nnew model:\n$new\nB waited for A: $b_waited");
}

my $v2 = version();
cmp_ok($v2, '>', $v1, 'the committed retraining has a greater version');
is($sb->query_safe($recs_sql), $new, 'after the commit B sees the new model');
is(fresh_recs(), $new, 'a fresh session sees the new model');
is($sa->query_safe($recs_sql), $new, 'A sees its model after the commit');

# ---------------------------------------------------------------------------
# Two trainings of the same model at once: the second waits for the first
# (a lock of the model that no SQL command takes) and then succeeds.
$sa->query_safe('BEGIN');
$sa->query_safe(train_sql(3));
send_query($sb, train_sql(4));
ok(pid_waits_on_lock($b_pid, 'object'),
	'a second training of the model waits for the first');
$sa->query_safe('COMMIT');
($out, $err) = finish_query($sb);
is($out, 'c|2000|500', 'the second training succeeds after the first commits');
is($err, '', 'without an error');

my $v4 = version();
cmp_ok($v4, '>', $v2, 'the version increased');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(DISTINCT version) FROM wals_training_log
		  WHERE model = 'c' AND version > } . $v2),
	'2',
	'both trainings are logged');

# The model left is that of the training with seed 4, whole: a training with
# the same parameters into another model has the same factors.
$node->safe_psql('postgres',
	q{SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	  model => 'ref', factors => 16, iterations => 5, seed => 4)});

sub same_factors
{
	my ($model, $side) = @_;
	my $id = $side eq 'user' ? 'user_id' : 'item_id';
	my ($t, $r) = ("${model}_${side}_factors", "ref_${side}_factors");
	return $node->safe_psql(
		'postgres', qq{
SELECT (SELECT count(*) FROM $t) = (SELECT count(*) FROM $r)
   AND (SELECT count(*) FROM $t JOIN $r USING ($id)) = (SELECT count(*) FROM $r)
   AND (SELECT coalesce(max(abs(x - y)), 1) < 1e-4
        FROM $t a JOIN $r b USING ($id), unnest(a.factors, b.factors) AS u(x, y))});
}
is(same_factors('c', 'user'), 't', 'user factors are those of the last training');
is(same_factors('c', 'item'), 't', 'item factors are those of the last training');
my $final = fresh_recs();
is($sb->query_safe($recs_sql), $final, 'B serves the final model');
is($sa->query_safe($recs_sql), $final, 'A serves the final model');

# Both autocommit and overlapping, the first lasting a second or two: long
# enough that B starts waiting before A ends on a machine busy with other
# work (with 40 iterations A once ended first, under two other test runs).
send_query($sa, train_sql(5, 'medium', 200));
ok( $node->poll_query_until(
		'postgres', qq{SELECT EXISTS (SELECT 1 FROM pg_locks
		  WHERE pid = $a_pid AND locktype = 'object' AND classid = 'wals_model_locks'::regclass AND granted)}),
	'A trains');
send_query($sb, train_sql(6));
ok(pid_waits_on_lock($b_pid, 'object'), 'B waits for A');
my ($a_out, $a_err) = finish_query($sa);
my ($b_out, $b_err) = finish_query($sb);
is($a_out . $a_err, 'c|10000|2000', 'overlapping trainings: the first succeeds');
is($b_out . $b_err, 'c|2000|500', 'overlapping trainings: the second succeeds');
my $v6 = version();
cmp_ok($v6, '>', $v4, 'the version increased');
is($node->safe_psql('postgres',
		q{SELECT users || ' ' || items FROM wals_models WHERE model = 'c'}),
	'2000 500', 'the catalog row is that of the second training');
is($node->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM c_user_factors) || ' ' || (SELECT count(*) FROM c_item_factors)}),
	'2000 500', 'the factor tables are those of the second training');
$final = fresh_recs();
is($sb->query_safe($recs_sql), $final, 'B serves the final model');
is($sa->query_safe($recs_sql), $final, 'A serves the final model');

# ---------------------------------------------------------------------------
# A reader that has not served the model yet, waiting for the commit of a
# retraining, gets the new model whole.
my $sc = $node->background_psql('postgres', on_error_stop => 0, timeout => 120);
$sc->set_query_timer_restart;
my $sc_pid = $sc->query_safe('SELECT pg_backend_pid()');
$sa->query_safe('BEGIN');
$sa->query_safe(train_sql(8));
$new = $sa->query_safe($recs_sql);
isnt($new, $final, 'A retrains once more');
send_query($sc, $recs_sql);
my $c_waited = pid_waits_on_lock($sc_pid, 'relation');
note("C " . ($c_waited ? 'waits' : 'does not wait') . ' for A');
$sa->query_safe('COMMIT');
($out, $err) = finish_query($sc);
if ($c_waited)
{
	is($out . $err, $new,
		'C, which had no model loaded, waited for the commit and gets the new model');
}
else
{
	is($out . $err, $final,
		'C, which had no model loaded, did not wait and got the previous model');
}
is($sc->query_safe($recs_sql), $new, 'after the commit C gets the new model');
$final = $new;

# ---------------------------------------------------------------------------
# A REPEATABLE READ transaction whose snapshot predates a retraining.
$sb->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
my $snap_version = $sb->query_safe($version_sql);
$sa->query_safe(train_sql(9));
cmp_ok(version(), '>', $snap_version, 'retrained after B took its snapshot');
($out, $err) = $sb->query($recs_sql);
{
	# A retraining writes the new factors into the model's own tables: B's
	# snapshot still shows the previous catalog row and the previous rows,
	# so it serves the previous model, whole, and never an empty one.
	is($out, $final, 'an old REPEATABLE READ snapshot serves the previous model, whole')
	  or diag("B got: '$out' / '$sb->{stderr}'");
}
$sb->query('ROLLBACK');
$sb->{stderr} = '';
is($sb->query_safe($recs_sql), fresh_recs(),
	'after its transaction B serves the latest model');

$sa->quit;
$sb->quit;
$sc->quit;
$node->stop;
done_testing();
