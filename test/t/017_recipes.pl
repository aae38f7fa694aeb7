
# The recipes of examples/, run as the documents show them (doc/*.md show each
# file as it is, which is checked first): two shard servers and a
# coordinator set up for sharded training over postgres_fdw by a superuser,
# each file with only the hosts, ports and passwords it names replaced; the
# ratings loaded straight into the shards; the model trained and served by
# analyst, an ordinary role that logs in with its password, whose
# connections to the shards log in as wals_reader with the password the
# shards ask for; then pg_cron set up on the coordinator, and a job that
# analyst schedules runs as analyst and retrains the model.  The Citus
# recipe runs in 013_citus.pl, where Citus is installed.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Poll;
use Recipes;
use Test::More;

readme_shows_recipes();

my %password = (reader => 'reader secret 1', analyst => 'analyst secret 2');

# ---------------------------------------------------------------------------
# Step 1, on each shard, as a superuser.  Each asks wals_reader for its
# password, as the recipe tells the DBA to.
my @shards;
for my $k (1, 2)
{
	my $node = PostgreSQL::Test::Cluster->new("recipe_shard$k");
	$node->init;
	$node->start;
	$node->safe_psql('postgres', 'CREATE DATABASE app');
	ask_password($node, 'wals_reader');
	my ($ret, $stdout, $stderr) = run_recipe($node, 'postgres_fdw/1_shard.sql',
		values => { reader_password => $password{reader} });
	is($ret, 0, "1_shard.sql runs on shard $k") or diag($stderr);
	push @shards, $node;
}
my ($ret, $stdout, $stderr) = $shards[0]->psql('app', 'SELECT 1',
	extra_params => [ '-U', 'wals_reader' ]);
like($stderr, qr/no password supplied|password authentication failed/,
	'a shard asks wals_reader for its password');

# ---------------------------------------------------------------------------
# Step 2, on the coordinator, as a superuser; analyst logs in there with its
# password too.
my $coord = PostgreSQL::Test::Cluster->new('recipe_coordinator');
$coord->init;
$coord->start;
$coord->safe_psql('postgres', 'CREATE DATABASE app');
ask_password($coord, 'analyst');
($ret, $stdout, $stderr) = run_recipe(
	$coord,
	'postgres_fdw/2_coordinator.sql',
	values => {
		shard1_host => $shards[0]->host,
		shard1_port => $shards[0]->port,
		shard2_host => $shards[1]->host,
		shard2_port => $shards[1]->port,
		reader_password => $password{reader},
		analyst_password => $password{analyst},
	});
is($ret, 0, '2_coordinator.sql runs on the coordinator') or diag($stderr);
is($coord->safe_psql('app', q{SELECT rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls
	FROM pg_roles WHERE rolname = 'analyst'}), 'f', 'analyst is an ordinary role');

# ---------------------------------------------------------------------------
# Step 3, the ratings straight into each shard, the same file on both.
my $csv = ratings_csv(2000, 15);
my $rows = () = $csv =~ /\n/g;
for my $k (1, 2)
{
	($ret, $stdout, $stderr) = run_recipe($shards[ $k - 1 ], "postgres_fdw/3_load_shard$k.sql",
		stdin => $csv);
	is($ret, 0, "3_load_shard$k.sql loads shard $k") or diag($stderr);
	is( $shards[ $k - 1 ]->safe_psql(
			'app', q{SELECT count(*) FROM ratings_part WHERE user_id }
			  . ($k == 1 ? '<' : '>=') . ' 1000000'),
		$rows / 2,
		"shard $k holds the rows of its range, half of them");
}

# A statement as analyst on the coordinator, logging in with its password.
sub as_analyst
{
	my ($sql) = @_;
	local $ENV{PGPASSWORD} = $password{analyst};
	my ($ret, $stdout, $stderr) =
	  $coord->psql('app', $sql, connstr => $coord->connstr('app') . ' user=analyst');
	die "as analyst: $sql: $stderr" if $ret != 0;
	return $stdout;
}
is(as_analyst('SELECT count(*) FROM shop.ratings'), $rows,
	'analyst reads every row through the partitioned table');

# ---------------------------------------------------------------------------
# Step 4, training and serving as analyst.
($ret, $stdout, $stderr) = run_recipe($coord, 'train.sql',
	user => 'analyst', password => $password{analyst});
is($ret, 0, 'train.sql runs as analyst') or diag($stderr);
note($stderr);
like($stdout, qr/^1\|shard1\|shop\.ratings_1\|public\.ratings_part\n2\|shard2\|shop\.ratings_2\|public\.ratings_part$/m,
	'wals_shards() names both shards and their partitions');
trained_as_recipe($coord, $stdout, $rows, 'shards');

# ---------------------------------------------------------------------------
# Fresh recommendations (examples/pg_cron/4_refresh_model.sql, then
# 5_refresh_schedule.sql): analyst's table of clicks with changed_at and a
# model that follows it.  The refresh job's command runs here as the file
# has it, so that it is tested where pg_cron is missing too; the schedule
# itself below, with pg_cron.
my $clicks_csv = '';
for my $u (1 .. 300)
{
	$clicks_csv .= sprintf("%d,%d,%d\n", $u, ($u * 7 + $_ * 13) % 200 + 1, 1 + ($u + $_) % 3) for 1 .. 12;
}
($ret, $stdout, $stderr) = run_recipe($coord, 'pg_cron/4_refresh_model.sql',
	user => 'analyst', password => $password{analyst}, stdin => $clicks_csv);
is($ret, 0, '4_refresh_model.sql runs as analyst') or diag($stderr);
like($stdout, qr/^clicks\|300\|200\|3600$/m, 'the model of the clicks is trained from every row');
is( $coord->safe_psql(
		'app', q{SELECT changed_col, changed_mark IS NOT NULL, refreshed_at IS NULL
		  FROM wals_models WHERE (schema, model) = ('shop', 'clicks')}),
	'changed_at|t|t', 'the model follows changed_at, marked, never refreshed');

my $schedule = slurp_file("$FindBin::RealBin/../../examples/pg_cron/5_refresh_schedule.sql");
my ($refresh_sql) = $schedule =~ /cron\.schedule\('wals-clicks-refresh', '[^']+', \$\$\n(.*?)\$\$\)/s;
my ($status_sql) = $schedule =~ /^(SELECT changed_col, .*?;)$/ms;
ok(defined $refresh_sql && defined $status_sql, '5_refresh_schedule.sql has the refresh job and the status query');

# The application's writes, as doc/operations.md shows them: a click adds
# one to the row and moves its changed_at.
sub click
{
	my ($user, $item) = @_;
	as_analyst(qq{INSERT INTO shop.clicks AS c (user_id, item_id) VALUES ($user, $item)
  ON CONFLICT (user_id, item_id) DO UPDATE SET clicks = c.clicks + 1, changed_at = clock_timestamp();});
	return;
}
click(5000001, $_) for 1 .. 5;    # a new user
click(42, 777);                    # a new item
click(43, 777);
click(44, (44 * 7 + 13) % 200 + 1);    # a row that was there
like(as_analyst($refresh_sql), qr/^8\|4\|1\|\d+\|1\|[^|]+\|[0-9.e-]+$/,
	'the refresh job takes in the 8 rows changed: 4 users, 1 of them new, and the new item');
like(as_analyst($refresh_sql), qr/^(0\|0\|0\|0\|0\|.*)?$/, 'the next finds nothing new');
is( as_analyst(
		q{SELECT (SELECT count(*) FROM wals_recommend(5000001, 10, 'shop.clicks')),
		  wals_predict(42, 777, 'shop.clicks') IS NOT NULL,
		  777 IN (SELECT item_id FROM wals_rated_items(42, 'shop.clicks'))}),
	'10|t|t', 'the new user is served, the new item scored, and left out for who clicked it');
like(as_analyst($status_sql), qr/^changed_at\|[^|]+\|[^|]+\|\d+\|[^|]+$/,
	'wals_models shows the mark, the last refresh and the rows it read');

# A refresh during a retraining waits on the model's lock for its commit,
# then reads from the retraining's mark.
my $trainer = $coord->background_psql('app', on_error_stop => 0, timeout => 120);
$trainer->query_safe('SET client_min_messages = warning');
$trainer->query_safe('BEGIN');
$trainer->query_safe(q{SELECT 1 FROM wals_retrain('shop.clicks')});
click(45, 778);
click(46, 778);
my $refresher = $coord->background_psql('app', on_error_stop => 0, timeout => 120);
$refresher->query_safe('SET client_min_messages = warning');
$refresher->query_until(qr/sent/, "\\echo sent\n$refresh_sql;\n\\echo done\n");
ok( wait_until(
		$coord, 'app', q{EXISTS (SELECT FROM pg_stat_activity WHERE query LIKE '%FROM wals_refresh(%'
		  AND wait_event_type = 'Lock' AND wait_event = 'object')}),
	'a refresh waits for a retraining of the model');
$trainer->query_safe('COMMIT');
my $waited = eval {
	pump_until($refresher->{run}, $refresher->{timeout}, \$refresher->{stdout}, qr/^done\n/m);
};
like($refresher->{stdout}, qr/^2\|2\|0\|\d+\|1\|/m,
	'after the commit it takes in the 2 rows the retraining did not see, no more')
  or diag($refresher->{stdout}, $refresher->{stderr});
is($refresher->{stderr}, '', 'without an error');
$_->quit for ($trainer, $refresher);
is( $coord->safe_psql(
		'app', q{SELECT refreshed_ratings, changed_mark::timestamptz = (SELECT max(changed_at) FROM shop.clicks)
		  FROM wals_models WHERE (schema, model) = ('shop', 'clicks')}),
	'2|t', 'the retraining started the count of rows taken in again, and the refresh marked the last');

# ---------------------------------------------------------------------------
# pg_cron: its settings appended to the coordinator's postgresql.conf as the
# file is, a restart, then step 2 as a superuser and step 3 as analyst.
my $pkglibdir = $coord->config_data('--pkglibdir');
SKIP:
{
	skip "pg_cron is not installed ($pkglibdir/pg_cron.so; make deps installs postgresql-15-cron)", 1
	  unless -f "$pkglibdir/pg_cron.so";

	$coord->append_conf('postgresql.conf',
		slurp_file("$FindBin::RealBin/../../examples/pg_cron/1_postgresql.conf"));
	$coord->restart;
	($ret, $stdout, $stderr) = run_recipe($coord, 'pg_cron/2_cron.sql');
	is($ret, 0, '2_cron.sql runs as a superuser') or diag($stderr);
	($ret, $stdout, $stderr) = run_recipe($coord, 'pg_cron/3_schedule.sql',
		user => 'analyst', password => $password{analyst});
	is($ret, 0, '3_schedule.sql runs as analyst') or diag($stderr);
	is( $coord->safe_psql(
			'app', q{SELECT username, database, schedule FROM cron.job
			  WHERE jobname = 'wals-nightly'}),
		'analyst|app|0 3 * * *', 'the job is analyst\'s, in app, at 03:00');

	# The test cannot wait for 03:00: analyst schedules its job again, the
	# same command, every minute (cron.alter_job is a superuser's in pg_cron
	# 1.4; cron.schedule replaces a job of the same name).
	my $version = $coord->safe_psql('app',
		q{SELECT version FROM wals_models WHERE (schema, model) = ('shop', 'ratings')});
	as_analyst(q{SELECT cron.schedule(jobname, '* * * * *', command) FROM cron.job
	  WHERE jobname = 'wals-nightly'});
	ok( wait_until(
			$coord, 'app', qq{(SELECT version > $version FROM wals_models
			  WHERE (schema, model) = ('shop', 'ratings'))}),
		'the job retrained the model');
	ok( $coord->poll_query_until(
			'app', q{SELECT count(*) > 0 FROM cron.job_run_details
			  WHERE status = 'succeeded' AND username = 'analyst'}),
		'pg_cron records the run, as analyst, as succeeded')
	  or diag($coord->safe_psql('app', 'SELECT status, return_message FROM cron.job_run_details'));
	is( $coord->safe_psql(
			'app', q{SELECT trained_by, device, warm_start FROM wals_models
			  WHERE (schema, model) = ('shop', 'ratings')}),
		'analyst|shards|t', 'analyst retrained it on the shards, from its factors');
	is(as_analyst(q{SELECT count(*) FROM wals_recommend(42, 10, 'shop.ratings')}),
		'10', 'the retrained model serves');
	as_analyst(q{SELECT cron.unschedule('wals-nightly')});

	($ret, $stdout, $stderr) = run_recipe($coord, 'pg_cron/5_refresh_schedule.sql',
		user => 'analyst', password => $password{analyst});
	is($ret, 0, '5_refresh_schedule.sql runs as analyst') or diag($stderr);
	like($stdout, qr/^changed_at\|[^|]+\|[^|]+\|\d+\|[^|]+$/m, 'and shows how fresh the model is');
	is( $coord->safe_psql(
			'app', q{SELECT string_agg(format('%s %s %s %s', jobname, username, database, schedule), ', '
			  ORDER BY jobname) FROM cron.job WHERE jobname LIKE 'wals-clicks-%'}),
		'wals-clicks-nightly analyst app 30 3 * * *, wals-clicks-refresh analyst app */5 * * * *',
		'the jobs are analyst\'s, in app, every five minutes and at 03:30');

	# The test waits for the next minute, not five: the same command every
	# minute.
	my ($refreshed, $taken) = split /\|/, $coord->safe_psql('app',
		q{SELECT refreshed_at, refreshed_ratings FROM wals_models WHERE (schema, model) = ('shop', 'clicks')});
	click(5000002, $_) for 1 .. 3;
	as_analyst(q{SELECT cron.schedule(jobname, '* * * * *', command) FROM cron.job
	  WHERE jobname = 'wals-clicks-refresh'});
	ok( wait_until(
			$coord, 'app', qq{(SELECT refreshed_at > '$refreshed' FROM wals_models
			  WHERE (schema, model) = ('shop', 'clicks'))}),
		'the job refreshed the model');
	is( $coord->safe_psql(
			'app', q{SELECT refreshed_ratings FROM wals_models
			  WHERE (schema, model) = ('shop', 'clicks')}),
		$taken + 3, 'it took in the 3 new rows (refreshed_ratings counts since the training)');
	is(as_analyst(q{SELECT count(*) FROM wals_recommend(5000002, 10, 'shop.clicks')}),
		'10', 'and the new user is served');
	ok( $coord->poll_query_until(
			'app', q{SELECT count(*) > 0 FROM cron.job_run_details d JOIN cron.job j USING (jobid)
			  WHERE j.jobname = 'wals-clicks-refresh' AND d.status = 'succeeded' AND d.username = 'analyst'}),
		'pg_cron records the refresh, as analyst, as succeeded');
	as_analyst(q{SELECT cron.unschedule('wals-clicks-refresh')});
	as_analyst(q{SELECT cron.unschedule('wals-clicks-nightly')});
}

done_testing();
