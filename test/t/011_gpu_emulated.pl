
# The server trained by the kernels of gpu/ themselves, compiled for the
# host against the emulated device of test/gpu/emu (make test-gpu-emu
# builds test/gpu/wals_cuda_emu.so): the same model as the CPU's, rows
# longer than a block's share included; a row that cannot be solved read
# the same on both devices; and the device's faults (a launch, a cuBLAS
# call or an allocation that fails, a driver that is missing or too old)
# ending as on a device: the SQLSTATE, CUDA's words, nothing stored, the
# device memory freed.  Faults are set for the server's backends through
# the emulation's WALS_EMU environment variable, counted from each
# backend's first call.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $engine = $ENV{WALS_EMU_ENGINE};
plan skip_all =>
  'WALS_EMU_ENGINE is not set (test/installcheck.sh sets it after make test-gpu-emu)'
  unless defined $engine && -r $engine;

delete $ENV{WALS_EMU};
my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
client_min_messages = warning
wals.cuda_library = '$engine'
});
$node->start;

# User 1 rates 2600 items and item 1 is rated by every user, 2100: rows of
# more than 2048 cells on both sides, which the engine splits across
# blocks.  No more than that, as the emulated device runs every thread of a
# kernel one after another.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 2600 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(2, 2100) u, generate_series(1, 6) g
  UNION ALL SELECT u, 1, 3 FROM generate_series(2, 2100) u
  UNION ALL SELECT 1, i, 1 + i % 5 FROM generate_series(1, 2600) i;
ANALYZE ratings;
});

sub train
{
	my ($model, $args, %opts) = @_;
	return $node->psql(
		'postgres', qq{\\set VERBOSITY verbose
		  SELECT device, iterations FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
		    model => '$model', factors => 8, iterations => 3, $args)},
		%opts);
}

sub memory_free
{
	return $node->safe_psql('postgres',
		q{SELECT memory_free = memory_total FROM wals_devices() WHERE device = 'gpu0'});
}

# The backends of a restarted server load the library with these knobs.
sub emulate
{
	my ($knobs) = @_;
	if (defined $knobs) { $ENV{WALS_EMU} = $knobs; }
	else { delete $ENV{WALS_EMU}; }
	$node->restart;
}

is( $node->safe_psql(
		'postgres',
		q{SELECT device, usable, name, reason IS NULL FROM wals_devices() WHERE device <> 'cpu'}),
	'gpu0|t|wals emulated device 0|t',
	'wals_devices() lists the emulated device');

# ---------------------------------------------------------------------------
# The same iterations on both devices.
for my $case (
	[ 'cg', q{solver => 'cg'} ],
	[ 'cholesky', q{solver => 'cholesky'} ],
	[ 'subspace', q{solver => 'subspace', block_size => 3} ],
	[ 'cg_ncg', q{solver => 'cg', accelerate => 'ncg'} ],
	[ 'explicit', q{solver => 'cg', feedback => 'explicit'} ])
{
	my ($name, $args) = @$case;
	my ($ret, $stdout, $stderr) = train("c_$name", "$args, device => 'cpu', workers => 0");
	is($ret, 0, "$name on the CPU") or diag($stderr);
	($ret, $stdout, $stderr) = train("g_$name", "$args, device => 'gpu'");
	is($ret, 0, "$name on the emulated device") or diag($stderr);
	is($stdout, 'gpu|3', "$name: trained on the GPU engine");
	is( $node->safe_psql(
			'postgres', qq{
SELECT string_agg(c.iteration || ':' || c.step, ',' ORDER BY c.iteration)
FROM wals_training_log c JOIN wals_training_log g USING (iteration)
WHERE (c.schema, c.model, g.schema, g.model) = ('public', 'c_$name', 'public', 'g_$name')
  AND abs(c.loss - g.loss) <= 1e-5 * c.loss AND c.step = g.step}),
		$name eq 'cg_ncg' ? '1:als,2:ncg,3:ncg' : '1:als,2:als,3:als',
		"$name: every iteration's loss within 1e-5 of the CPU's, the same steps");
	is( $node->safe_psql(
			'postgres', qq{
SELECT max(abs(c - g)) < 1e-3
FROM c_${name}_item_factors a JOIN g_${name}_item_factors b USING (item_id),
     unnest(a.factors, b.factors) AS t(c, g)
WHERE item_id IN (1, 2, 3, 500, 2600)}),
		't', "$name: the same item factors on both devices, the long row's included");
}

# Out of core, the cells in temporary files, the engine uploads them from
# there: the same model as from memory.
{
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres', q{SET wals.max_memory = '400kB'; SET client_min_messages = debug1;
		  SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
		    model => 'g_cg_files', factors => 8, iterations => 3, solver => 'cg',
		    device => 'gpu')});
	is($ret, 0, 'out of core on the emulated device') or diag($stderr);
	is($stdout, 'gpu', 'out of core: trained on the GPU engine');
	like($stderr, qr/keeps its ratings in .* of temporary files/,
		'out of core: the cells in temporary files');
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM ((TABLE g_cg_item_factors EXCEPT ALL TABLE g_cg_files_item_factors)
  UNION ALL (TABLE g_cg_files_item_factors EXCEPT ALL TABLE g_cg_item_factors)) d}),
		'0', 'out of core: the same item factors as from memory, to the bit');
}
is(memory_free(), 't', 'the device memory is free after the trainings');

# Ratings that do not fit in the device's memory beside the rest of the
# training stay in host memory, pinned, and the kernels read them there:
# the same model, to the bit.  The rest's size comes from the error of a
# device too small even for it; cells in temporary files may not be
# pinned, and do not fit.
{
	emulate('memory=' . (64 << 20));
	my ($ret, $stdout, $stderr) = train('g_cg_host', q{solver => 'cg', device => 'gpu'});
	like($stderr,
		qr/ERROR:  53200: .*\nDETAIL:  starting a GPU training: it needs \d+ bytes of device memory beside its ratings, which host memory would hold, \d+ are free/,
		'a device too small even without the ratings: out of memory, saying so');
	my ($rest) = $stderr =~ /it needs (\d+) bytes of device memory beside/;
	$rest //= 0;
	emulate('memory=' . ($rest + 4096));
	($ret, $stdout, $stderr) = $node->psql(
		'postgres', q{SET client_min_messages = notice;
		  SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
		    model => 'g_cg_host', factors => 8, iterations => 3, solver => 'cg',
		    device => 'gpu')});
	is($ret, 0, 'ratings in host memory: trained') or diag($stderr);
	like($stderr,
		qr/DETAIL:  Uploaded in [0-9.]+ s, downloaded in [0-9.]+ s\. The ratings did not fit in the GPU's memory: it read them from host memory, pinned\./,
		'ratings in host memory: the NOTICE says so');
	is( $node->safe_psql(
			'postgres', q{
SELECT (SELECT count(*) FROM ((TABLE g_cg_item_factors EXCEPT ALL TABLE g_cg_host_item_factors)
  UNION ALL (TABLE g_cg_host_item_factors EXCEPT ALL TABLE g_cg_item_factors)) i)
     + (SELECT count(*) FROM ((TABLE g_cg_user_factors EXCEPT ALL TABLE g_cg_host_user_factors)
  UNION ALL (TABLE g_cg_host_user_factors EXCEPT ALL TABLE g_cg_user_factors)) u)}),
		'0', 'ratings in host memory: the same factors as on the device, to the bit');
	($ret, $stdout, $stderr) = $node->psql(
		'postgres', q{\set VERBOSITY verbose
		  SET wals.max_memory = '400kB';
		  SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
		    model => 'g_cg_host_files', factors => 8, iterations => 3, solver => 'cg',
		    device => 'gpu')});
	like($stderr, qr/ERROR:  53200: .*\nDETAIL:  starting a GPU training: it needs \d+ bytes of device memory, \d+ are free/,
		'ratings in temporary files are not pinned: out of memory');
	is(memory_free(), 't', 'ratings in host memory: the device memory is free after');
	emulate(undef);
}

# ---------------------------------------------------------------------------
# A row that cannot be solved: the same error on both devices, the user
# named by id.  A confidence that overflows a float makes the system of
# user 77 unsolvable.
$node->safe_psql('postgres',
	q{CREATE TABLE overflow AS SELECT * FROM ratings UNION ALL SELECT 77, 5, 1e38});
for my $solver ('cholesky', 'cg')
{
	my %error;
	for my $device ('cpu', 'gpu')
	{
		my ($ret, $stdout, $stderr) = $node->psql(
			'postgres', qq{\\set VERBOSITY verbose
			  SELECT device FROM wals_train('overflow', 'user_id', 'item_id', 'rating',
			    model => 'overflow', factors => 8, alpha => 1e6, solver => '$solver',
			    device => '$device', workers => 0)});
		($error{$device}) = $stderr =~ /(ERROR:.*)$/m;
		$error{$device} //= $stderr;
	}
	like($error{cpu}, qr/^ERROR:  22(023|003): .*\buser 77\b/,
		"$solver: a row that cannot be solved names its user");
	is($error{gpu}, $error{cpu}, "$solver: the emulated device reports it the same way");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_models WHERE model = 'overflow'}),
	'0', 'no model is left by the failed trainings');

# ---------------------------------------------------------------------------
# Faults in the middle of a training, and at its start.
my $before = $node->safe_psql('postgres',
	q{SELECT version, loss FROM wals_models WHERE model = 'g_cg'});
my $log_before = $node->safe_psql('postgres', q{SELECT count(*) FROM wals_training_log});
for my $fault (
	[ 'fail_launch_at=40', qr/ERROR:  38000: the GPU failed while training model "public.g_cg", iteration 2\nDETAIL:  solving (user|item) factors: too many resources requested for launch/,
		'a kernel launch that fails in the second iteration' ],
	[ 'fail_blas_at=5', qr/ERROR:  38000: the GPU failed while training model "public.g_cg", iteration [23]\nDETAIL:  .*CUBLAS_STATUS_EXECUTION_FAILED/,
		'a cuBLAS call that fails after the first iteration' ],
	[ 'fail_malloc_at=4', qr/ERROR:  53200: out of memory while starting to train model "public.g_cg" on the GPU/,
		'an allocation that fails as the training starts' ])
{
	my ($knobs, $expect, $what) = @$fault;
	emulate($knobs);
	my ($ret, $stdout, $stderr) = train('g_cg', q{solver => 'cg', device => 'gpu'});
	like($stderr, $expect, "$what: the error, with CUDA's words");
	is(memory_free(), 't', "$what: the device memory is freed");
	is($node->safe_psql('postgres', q{SELECT version, loss FROM wals_models WHERE model = 'g_cg'}),
		$before, "$what: the previous model survives");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_training_log}),
		$log_before, "$what: nothing is logged");
}

# ---------------------------------------------------------------------------
# No driver, no device, a driver too old.
for my $driver (
	[ 'driver=0', qr/no NVIDIA driver is installed/, 'no driver' ],
	[ 'devices=0', qr/no CUDA device/, 'no device' ],
	[ 'driver=2', qr/the NVIDIA driver is too old: it supports CUDA 11\.4/, 'a driver too old' ])
{
	my ($knobs, $reason, $what) = @$driver;
	emulate($knobs);
	like($node->safe_psql('postgres', q{SELECT string_agg(device || ': ' || coalesce(reason, ''), '; ') FROM wals_devices() WHERE device <> 'cpu'}),
		$reason, "$what: wals_devices() says why");
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		q{SET wals.gpu_min_ratings = 1; SELECT device FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'nodevice', factors => 8, iterations => 1, device => 'auto')});
	is($stdout, 'cpu', "$what: device auto trains on the CPU");
}
emulate(undef);

done_testing();
