
# The server's side of GPU training, driven through test/gpu/host_engine.so,
# a stand-in for wals_cuda.so that fills the same table of functions with
# the solvers of src/core on the host: the device is chosen as the settings
# say, the model equals the CPU's, the summary and catalog record the device,
# an engine that fails or runs out of memory leaves the previous model and
# frees its memory, and a cancel stops a training between iterations.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $engine = $ENV{WALS_HOST_ENGINE};
plan skip_all => 'WALS_HOST_ENGINE is not set (test/installcheck.sh sets it after make gpu-check)'
  unless defined $engine && -r $engine;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
client_min_messages = warning
wals.cuda_library = '$engine'
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 300 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 1500) u, generate_series(1, 12) g;
ANALYZE ratings;
});

sub train
{
	my ($model, $args, %opts) = @_;
	$args = "iterations => 4, $args" unless $args =~ /iterations/;
	return $node->psql(
		'postgres', qq{SET client_min_messages = notice;
		  SELECT device, iterations, loss FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
		    model => '$model', factors => 8, $args)},
		%opts);
}

sub gpu_memory_free
{
	my ($session) = @_;
	my $sql = q{SELECT memory_free = memory_total FROM wals_devices() WHERE device = 'gpu0'};
	return ref($session) ? $session->query_safe($sql) : $node->safe_psql('postgres', $sql);
}

like(
	$node->safe_psql('postgres',
		q{SELECT device, usable, name, reason IS NULL FROM wals_devices() WHERE device <> 'cpu'}),
	qr/^gpu0\|t\|wals host engine \(test double\)\|t$/,
	'wals_devices() lists the engine\'s device');

# ---------------------------------------------------------------------------
# The same model on both devices: every solver, ALS-NCG around two of them
# through the engine's operations (combine, dot and line), frequency-scaled
# regularization, and a validation that reads the factors back after every
# iteration and keeps the best iterate.
for my $case (
	[ 'cg', q{solver => 'cg'} ],
	[ 'cholesky', q{solver => 'cholesky'} ],
	[ 'subspace', q{solver => 'subspace', block_size => 3} ],
	[ 'cg_ncg', q{solver => 'cg', accelerate => 'ncg'} ],
	[ 'subspace_ncg', q{solver => 'subspace', block_size => 3, accelerate => 'ncg'} ],
	[ 'cg_scaled', q{solver => 'cg', regularization_exponent => 1, unobserved_weight => 0.1} ],
	[ 'cholesky_scaled', q{solver => 'cholesky', regularization_exponent => 0.5} ],
	[ 'cg_validation', q{solver => 'cg', validation => 0.2, patience => 1000} ])
{
	my ($solver, $args) = @$case;
	my ($ret, $cpu, $stderr) = train("c_$solver", "$args, device => 'cpu', workers => 0");
	is($ret, 0, "$solver on the CPU") or diag($stderr);
	($ret, my $gpu, $stderr) = train("g_$solver", "$args, device => 'gpu'");
	is($ret, 0, "$solver on the GPU engine") or diag($stderr);
	like($gpu, qr/^gpu\|4\|/, "$solver: the summary row says gpu");
	like($stderr, qr/NOTICE:  model "public.g_$solver" iteration 4 of 4/,
		"$solver: a NOTICE for every iteration");
	like($stderr, qr/NOTICE:  model "public.g_$solver" trained on the GPU\nDETAIL:  Uploaded in [0-9.]+ s, downloaded in [0-9.]+ s\./,
		"$solver: a NOTICE with the upload and download times");
	my ($cpu_loss) = $cpu =~ /\|([^|]+)$/;
	my ($gpu_loss) = $gpu =~ /\|([^|]+)$/;
	cmp_ok(abs($gpu_loss - $cpu_loss) / $cpu_loss, '<', 1e-6,
		"$solver: the same loss on both devices ($gpu_loss, $cpu_loss)");
	is( $node->safe_psql(
			'postgres', qq{
SELECT max(abs(c - g)) < 1e-4
FROM c_${solver}_item_factors a JOIN g_${solver}_item_factors b USING (item_id),
     unnest(a.factors, b.factors) AS t(c, g)}),
		't', "$solver: the same item factors on both devices");
	is( $node->safe_psql(
			'postgres', qq{
SELECT string_agg(device || ':' || iterations, ',' ORDER BY model) FROM wals_models
WHERE model IN ('c_$solver', 'g_$solver')}),
		'cpu:4,gpu:4', "$solver: wals_models records the device");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM (SELECT l.model, l.iteration, l.step
  FROM wals_training_log l JOIN wals_models USING (schema, model, version)
  WHERE model IN ('c_$solver', 'g_$solver')) t
GROUP BY iteration HAVING count(DISTINCT step) > 1}),
		'', "$solver: the same steps in the training log on both devices");
}
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM wals_recommend(7, 5, 'c_cg') c FULL JOIN wals_recommend(7, 5, 'g_cg') g
  USING (item_id) WHERE c.item_id IS NULL OR g.item_id IS NULL}),
	'0', 'the same recommendations from both devices');

# ---------------------------------------------------------------------------
# auto takes the GPU from wals.gpu_min_ratings ratings up.
my ($ret, $stdout, $stderr) =
  train('a', "device => 'auto'");
like($stdout, qr/^cpu\|/, 'auto below wals.gpu_min_ratings trains on the CPU');
unlike($stderr, qr/trains on the CPU/, 'auto below the threshold says nothing of the GPU');
($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{SET wals.gpu_min_ratings = 1000; SET wals.device = 'auto';
	  SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	    model => 'a', factors => 8, iterations => 2)});
is($stdout, 'gpu', 'auto from wals.gpu_min_ratings ratings up trains on the GPU');

# auto takes only a GPU of a kind the engine passed check_train on; 'gpu'
# takes any, and wals_devices() says why auto leaves it alone.
$ENV{WALS_HOST_ENGINE_CC} = '8.0';
$node->restart;
($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{SET client_min_messages = notice; SET wals.gpu_min_ratings = 1000;
	  SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	    model => 'a', factors => 8, iterations => 2, device => 'auto')});
is($stdout, 'cpu', 'auto on a GPU of an unchecked kind trains on the CPU');
like($stderr, qr/NOTICE:  model "public.a" trains on the CPU: the GPU engine has not passed its checks on compute capability 8.0 \(wals host engine \(test double\)\), only on 9.0\nHINT:  Pass device => 'gpu'/,
	'and says why');
is( $node->safe_psql(
		'postgres', q{SELECT usable, reason FROM wals_devices() WHERE device = 'gpu0'}),
	't|the GPU engine has not passed its checks on compute capability 8.0 (wals host engine (test double)), only on 9.0',
	'wals_devices() says why auto leaves the GPU alone');
($ret, $stdout, $stderr) = train('a', "device => 'gpu'");
like($stdout, qr/^gpu\|/, 'device gpu trains on a GPU of an unchecked kind');
delete $ENV{WALS_HOST_ENGINE_CC};
$node->restart;

# The tolerance stops a GPU training as it stops a CPU one.
($ret, $stdout, $stderr) = train('t', "device => 'gpu', tolerance => 0.5, iterations => 50");
like($stdout, qr/^gpu\|([2-9]|[1-4][0-9])\|/, 'tolerance stops a GPU training early')
  or diag($stderr);
is(gpu_memory_free(), 't', 'the device memory is free after the trainings');

my $before = $node->safe_psql('postgres',
	q{SELECT version, loss FROM wals_models WHERE model = 'g_cg'});

# ---------------------------------------------------------------------------
# An engine that fails in the third iteration.
$ENV{WALS_HOST_ENGINE_FAIL_AT} = 3;
$node->restart;
($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{\set VERBOSITY verbose
	  SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	    model => 'g_cg', factors => 8, iterations => 4, device => 'gpu');
	  SELECT memory_free = memory_total FROM wals_devices() WHERE device = 'gpu0'},
	on_error_stop => 0);
like($stderr, qr/ERROR:  38000: the GPU failed while training model "public.g_cg", iteration 3\nDETAIL:  injected failure in iteration 3/,
	'a failing engine is an error naming the iteration, with the engine\'s words in the detail');
is($stdout, 't', 'the failed training freed the device memory');
is($node->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 'g_cg'}),
	$before, 'the previous model survives a failing engine');
delete $ENV{WALS_HOST_ENGINE_FAIL_AT};

# ---------------------------------------------------------------------------
# A device too small for the training.
$ENV{WALS_HOST_ENGINE_MEMORY} = 10000;
$node->restart;
($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{\set VERBOSITY verbose
	  SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	    model => 'g_cg', factors => 8, device => 'gpu')});
like($stderr, qr/ERROR:  53200: out of memory while starting to train model "public.g_cg" on the GPU\nDETAIL:  out of device memory/,
	'device gpu on a device too small is an out-of-memory error');
like($stderr, qr/HINT:  Lower "factors", or pass device => 'cpu'/, 'with a hint');
($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{SET client_min_messages = notice; SET wals.gpu_min_ratings = 1;
	  SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	    model => 'small', factors => 8, iterations => 2, device => 'auto')});
is($stdout, 'cpu', 'auto on a device too small trains on the CPU');
like($stderr, qr/NOTICE:  model "public.small" trains on the CPU: the GPU engine could not start: out of device memory/,
	'and says why');
is($node->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 'g_cg'}),
	$before, 'the previous model survives a device too small');
delete $ENV{WALS_HOST_ENGINE_MEMORY};

# ---------------------------------------------------------------------------
# A row that cannot be solved reads the same on either device: the same
# SQLSTATE, the same message, the user named by id.  A confidence that
# overflows a float makes the system of user 77 unsolvable.
$node->restart;
$node->safe_psql('postgres',
	q{CREATE TABLE overflow AS SELECT * FROM ratings UNION ALL SELECT 77, 5, 1e38});
for my $solver ('cholesky', 'cg')
{
	my %error;
	for my $run ([ 'cpu', 0 ], [ 'cpu', 2 ], [ 'gpu', 0 ])
	{
		my ($device, $workers) = @$run;
		($ret, $stdout, $stderr) = $node->psql(
			'postgres', qq{\\set VERBOSITY verbose
			  SELECT device FROM wals_train('overflow', 'user_id', 'item_id', 'rating',
			    model => 'overflow', factors => 8, alpha => 1e6, solver => '$solver',
			    device => '$device', workers => $workers)});
		($error{"$device$workers"}) = $stderr =~ /(ERROR:.*)$/m;
		$error{"$device$workers"} //= $stderr;
	}
	like($error{cpu0}, qr/^ERROR:  22(023|003): .*\buser 77\b.* while training model "public.overflow", iteration 1$/,
		"$solver: a row that cannot be solved is an error naming its user");
	is($error{cpu2}, $error{cpu0}, "$solver: the same with parallel workers");
	is($error{gpu0}, $error{cpu0}, "$solver: the GPU engine reports it the same way");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_models WHERE model = 'overflow'}),
	'0', 'no model is left by the failed trainings');

# ---------------------------------------------------------------------------
# A cancel between iterations frees the device memory.  Any iteration
# from the third shows the loss of the one before: a busy machine's polls
# may miss a given one.
$ENV{WALS_HOST_ENGINE_DELAY_MS} = 200;
$node->restart;
my $bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 120);
$bg->set_query_timer_restart;
my $pid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_until(qr/starting/, q{\echo starting
SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
  model => 'g_cg', factors => 8, iterations => 1000, device => 'gpu');
});
ok( $node->poll_query_until(
		'postgres', qq{SELECT query ~ '^wals_train: model "public[.]g_cg", iteration ([3-9]|[1-9][0-9]+) of 1000, sweeping on the GPU; loss [^ ]+ after iteration [0-9]+ [(]'
		  FROM pg_stat_activity WHERE pid = $pid}),
	'pg_stat_activity shows the GPU training\'s progress');
my $start = time;
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
my $seen = eval {
	pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr},
		qr/canceling statement due to user request/);
};
my $elapsed = time - $start;
ok($seen, 'the GPU training ends on a cancel') or diag("stderr: $bg->{stderr}; $@");
note("the cancelled GPU training ended after $elapsed s");
$bg->{stderr} = '';
is(gpu_memory_free($bg), 't', 'the cancelled training freed the device memory');
$bg->quit;
is($node->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 'g_cg'}),
	$before, 'the previous model survives a cancel');

$node->stop;
done_testing();
