
# Nightly retraining with pg_cron: a job scheduled with cron.schedule runs
# wals_train, the model's version advances, and a session serving the model
# meanwhile never fails; another runs CALL wals_tune_concurrently, whose
# trials commit one by one.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Poll;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;

my $pkglibdir = $node->config_data('--pkglibdir');
plan skip_all => "pg_cron is not installed ($pkglibdir/pg_cron.so; make test installs postgresql-15-cron)"
  unless -f "$pkglibdir/pg_cron.so";

$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
# jobs run in background workers: the test cluster takes no TCP connections
cron.use_background_workers = on
max_worker_processes = 16
client_min_messages = warning
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_cron;
CREATE EXTENSION wals;
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 400 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 3000) u, generate_series(1, 20) g;
CREATE INDEX ON ratings (user_id);
SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'nightly',
  factors => 16, iterations => 5);
});
my $v1 = $node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'nightly'});

# A reader serving the model, one transaction per call, until the version
# has advanced and a few calls after.
my $reader = $node->background_psql('postgres', on_error_stop => 0, timeout => 240);
$reader->set_query_timer_restart;
$reader->query_until(qr/reading/, qq{\\echo reading
DO \$\$
DECLARE
  after int := 0;
  calls int := 0;
BEGIN
  WHILE after < 20 AND calls < 200000 LOOP
    PERFORM count(*) FROM wals_recommend(1 + calls % 3000, 10, 'nightly');
    calls := calls + 1;
    IF (SELECT version FROM wals_models WHERE model = 'nightly') > $v1 THEN
      after := after + 1;
    END IF;
    COMMIT;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RAISE WARNING 'reader made % calls', calls;
END \$\$;
\\echo done
});

# The recipe of doc/operations.md: retrain every night at 03:00 would be '0 3 * * *';
# every minute here, so that the test sees a run.
$node->safe_psql('postgres',
	q{SELECT cron.schedule('wals-nightly', '* * * * *',
	  $$SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'nightly',
	    factors => 16, iterations => 5, warm_start => true)$$)});
# A tuning that commits after each trial, scheduled as pg_cron runs any
# command: a statement of its own, so the procedure may commit.
$node->safe_psql('postgres',
	q{SELECT cron.schedule('wals-tune', '* * * * *',
	  $$CALL wals_tune_concurrently('ratings', 'user_id', 'item_id', 'rating', model => 'tuned',
	    max_trials => 2, space => '{"factors": [8]}')$$)});
ok(wait_until($node, 'postgres', qq{(SELECT version > $v1 FROM wals_models WHERE model = 'nightly')}),
	'the scheduled training ran and the version advanced');
ok( wait_until(
		$node, 'postgres', q{EXISTS (SELECT FROM wals_models WHERE model = 'tuned')}),
	'the scheduled tuning ran and stored its model');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) >= 2, count(DISTINCT xmin::text) >= 2,
		  count(*) FILTER (WHERE chosen) >= 1 FROM wals_tuning_log WHERE model = 'tuned'}),
	't|t|t', 'its trials were committed one by one, one of them chosen');
$node->safe_psql('postgres', q{SELECT cron.unschedule('wals-tune')});
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) > 0 FROM cron.job_run_details WHERE status = 'succeeded'}),
	'pg_cron records the run as succeeded');

my $done = eval {
	pump_until($reader->{run}, $reader->{timeout}, \$reader->{stdout}, qr/done/);
};
ok($done, 'the reader finished');
unlike($reader->{stderr}, qr/ERROR/, 'no call of the reader failed');
like($reader->{stderr}, qr/reader made \d+ calls/, 'the reader served throughout');
note($reader->{stderr});
$reader->quit;

is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_recommend(42, 10, 'nightly')}),
	'10', 'the retrained model serves');
$node->safe_psql('postgres', q{SELECT cron.unschedule('wals-nightly')});

$node->stop;
done_testing();
