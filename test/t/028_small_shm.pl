
# A small /dev/shm, as a container gets (64 MB by default in Docker).
# POSIX shared segments are files there, and making one larger than what is
# free is an error: a training with workers keeps the rows it reads in its
# own memory where /dev/shm has not room for them twice over, and trains
# without its workers, with a NOTICE, where it has not room for its
# matrices; the model is the one the leader alone trains.  (Before, the
# training failed: "could not resize shared memory segment".)  The server runs
# in a mount namespace of its own with a tmpfs of the size on /dev/shm,
# made through an unprivileged user namespace; where the kernel allows
# none, the test is skipped.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my ($uid, $gid) = ($<, (split ' ', $()[0]);
plan skip_all => 'no unprivileged user and mount namespaces here'
  unless system('unshare -Urm sh -c "mount -t tmpfs -o size=1m tmpfs /dev/shm" >/dev/null 2>&1') == 0;

my $node = PostgreSQL::Test::Cluster->new('shm');
$node->init;
$node->append_conf('postgresql.conf', "dynamic_shared_memory_type = posix\n");
my $running = 0;

# Start the server with a tmpfs of mb megabytes on /dev/shm.
sub start_with_shm
{
	my ($mb) = @_;
	my $data = $node->data_dir;
	my $log = $node->logfile;
	system_or_bail('unshare', '-Urm', 'sh', '-c',
		"mount -t tmpfs -o size=${mb}m tmpfs /dev/shm && "
		  . "exec unshare --user --map-user=$uid --map-group=$gid "
		  . "pg_ctl -w -D '$data' -l '$log' start");
	$running = 1;
}

sub stop
{
	system_or_bail('pg_ctl', '-w', '-D', $node->data_dir, '-m', 'fast', 'stop');
	$running = 0;
}

END
{
	system('pg_ctl', '-D', $node->data_dir, '-m', 'immediate', 'stop') if $running;
}

my %loss;
start_with_shm(512);
$node->safe_psql('postgres', q{
CREATE EXTENSION wals;
CREATE TABLE five_million AS
  SELECT u AS user_id, (u * 7 + (g % 90) * 13) % 6000 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 50000) u, generate_series(1, 100) g;
ANALYZE five_million;});
my $train = q{SET client_min_messages = debug1;
  SELECT loss FROM wals_train('five_million', 'user_id', 'item_id', 'rating',
    model => 'm', factors => 16, iterations => 2, workers => WORKERS, replace => true)};
(my $alone = $train) =~ s/WORKERS/0/;
(my $with = $train) =~ s/WORKERS/1/;

my ($ret, $stdout, $stderr) = $node->psql('postgres', $alone);
is($ret, 0, 'the leader alone trains');
$loss{$stdout}++;
($ret, $stdout, $stderr) = $node->psql('postgres', $with);
is($ret, 0, '/dev/shm of 512 MB: trains with a worker');
like($stderr, qr/renumbering the rows read and coding their ratings with 1 parallel workers/,
	'/dev/shm of 512 MB: the rows read are shared with the worker');
$loss{$stdout}++;
stop();

# 60 MB: no room for the rows read twice over, nor for the matrices
start_with_shm(60);
($ret, $stdout, $stderr) = $node->psql('postgres', $with);
is($ret, 0, '/dev/shm of 60 MB: trains') or diag($stderr);
like($stderr,
	qr/NOTICE:  model "public.m" trains without its parallel workers: they would need about [0-9]+ [kMG]?B of dynamic shared memory, and \/dev\/shm has [0-9]+ [kMG]?B free\nHINT:  Give \/dev\/shm more room/,
	'/dev/shm of 60 MB: a NOTICE says the training goes without its workers, and why');
unlike($stderr, qr/no dynamic shared memory segment is available/, '/dev/shm of 60 MB: and says it once');
unlike($stderr, qr/renumbering the rows read/, '/dev/shm of 60 MB: the rows read stay the leader\'s');
$loss{$stdout}++;
stop();

is(scalar keys %loss, 1, 'the same loss however much /dev/shm has');

done_testing();
