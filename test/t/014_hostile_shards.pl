
# The shard side of sharded training in the hands of a hostile ordinary
# role (LOGIN, a schema of its own, and the shard functions, which a DBA
# granted it): each call the coordinator makes, called by hand out of
# order, from inside the views and policies that a load runs, with counts
# that would size gigabytes, on an empty table.  Each break once found is
# tried again and must end in a result or a clean error: a call after the
# one that freed what it reads (55000), a view that ends the training it
# is being read by (55006), an empty partition (no crash), a plan of two
# billion users (refused past wals.max_memory, and nothing sized by it
# before its pages come).  A role not granted the functions cannot call
# them.  Then a seeded fuzz of the protocol, valid calls and random ones
# with malformed arguments interleaved, loads of views that call the
# other functions among them; after it all the server never restarted,
# a bystander session lived on, and no internal error was seen.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use ShardTest;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('hostile_shards');
$node->init;
# A crash (of code that has these breaks) restarts the server, so that
# every break is still tried; the bystander and the start time tell.
$node->append_conf('postgresql.conf', "client_min_messages = warning\nrestart_after_crash = on\n");
$node->start;

# The parameters of a training, f = 4, as the coordinator sends them
# (feedback, solver, factors, CG steps, regularization, alpha, w0, block
# size, scaled, exponent, workers: none).
my $params = '\x'
  . join('',
	'0' x 16, '0' x 16, sprintf('%016x', 4), sprintf('%016x', 3),
	'3fb999999999999a', '3ff0000000000000', '3ff0000000000000', sprintf('%016x', 4),
	'0' x 16, '0' x 16, '0' x 16);

# A plan page of side: n ids from 1, owned by shard 0 (users) or
# alternately by shards 0 and 1 (items).
sub page
{
	my ($side, $n) = @_;
	my $owners =
	  $side == 0
	  ? "decode(repeat('00', $n), 'hex')"
	  : "(SELECT string_agg(decode(lpad(to_hex(g % 2), 2, '0'), 'hex'), '' ORDER BY g) FROM generate_series(0, $n - 1) g)";
	return "int8send($n) || (SELECT string_agg(int8send(g), '' ORDER BY g) FROM generate_series(1, $n) g) || $owners";
}

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE ROLE mallory LOGIN;
CREATE ROLE eve LOGIN;
CREATE SCHEMA mallory AUTHORIZATION mallory;
CREATE SCHEMA eve AUTHORIZATION eve;
CREATE ROLE wals_shard_peer NOLOGIN;
GRANT wals_shard_peer TO mallory;
});
grant_shard_functions($node, 'wals_shard_peer');
my $start_time = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $bystander = $node->background_psql('postgres', on_error_stop => 0, timeout => 300);
$bystander->set_query_timer_restart;
my $bystander_pid = $bystander->query_safe('SELECT pg_backend_pid()');

# A session of role, logged in as it, so that the settings a DBA gave the
# role (ALTER ROLE ... SET) apply.
sub as_role
{
	my ($role, $sql) = @_;
	return $node->psql('postgres', "\\set VERBOSITY verbose\n$sql",
		on_error_stop => 0, extra_params => [ '-U', $role ]);
}

# After a call that crashed the server (the code as it was), wait for it
# to accept connections again, so that every break is tried.
sub server_back
{
	$node->poll_query_until('postgres', 'SELECT true');
}

my $crash =
  qr/server closed the connection|connection to server was lost|terminating connection|no connection to the server/;

my ($ret, $out, $err) = as_role(
	'mallory', q{
CREATE TABLE mallory.f (u int, i int, r real);
INSERT INTO mallory.f SELECT g % 10 + 1, g % 7 + 1, 1 FROM generate_series(1, 50) g;
CREATE TABLE mallory.big AS SELECT g AS u, g % 100 + 1 AS i, 1::real AS r
  FROM generate_series(1, 100000) g;
CREATE TABLE mallory.e (u int, i int, r real);
-- with a search_path of their own: wals reads with pg_catalog, pg_temp
CREATE FUNCTION mallory.call(sql text) RETURNS bool LANGUAGE plpgsql SET search_path = public AS
  $$BEGIN EXECUTE sql; RETURN true; END$$;
CREATE FUNCTION mallory.try(sql text) RETURNS bool LANGUAGE plpgsql SET search_path = public AS
  $$BEGIN EXECUTE sql; RETURN true; EXCEPTION WHEN object_in_use THEN RETURN true; END$$;
CREATE TABLE mallory.p (u int, i int, r real);
INSERT INTO mallory.p SELECT * FROM mallory.f;
ALTER TABLE mallory.p ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY p ON mallory.p USING (mallory.call('SELECT wals_shard_end()'));
});
is($ret, 0, 'mallory makes her tables, functions and a policy') or diag($err);

# Views that make the call of each function of the protocol while a load
# reads them, and the same catching the refusal (t_) so that the load
# goes on.
my %inner = (
	end => 'wals_shard_end()',
	ids => 'wals_shard_ids()',
	id_page => 'wals_shard_id_page(0, 0, 10)',
	load => q{wals_shard_load(''mallory.f'', ''u'', ''i'', ''r'', ''implicit'')},
	plan => "wals_shard_plan(''$params''::bytea, 0, 2, 10, 7)",
	route => 'wals_shard_route()',
	start => 'wals_shard_start()',
	take => 'wals_shard_take(0, 0, 10)',);
my $views = '';
for my $name (sort keys %inner)
{
	for my $kind ('call', 'try')
	{
		my $view = ($kind eq 'call' ? 'v_' : 't_') . $name;
		$views .= "CREATE VIEW mallory.$view AS SELECT * FROM mallory.f"
		  . " WHERE mallory.$kind('SELECT $inner{$name}');\n";
	}
}
($ret, $out, $err) = as_role('mallory', $views);
is($ret, 0, 'and views that call the shard functions') or diag($err);

# ---------------------------------------------------------------------------
# A role the DBA has not made a peer cannot call them at all.
for my $call ('wals_shard_ids()', 'wals_shard_end()',
	q{wals_shard_load('eve.r', 'u', 'i', NULL, 'implicit')})
{
	($ret, $out, $err) = as_role('eve', "SELECT $call");
	like($err, qr/ERROR:  42501: permission denied for function wals_shard_/,
		"a role not granted the shard functions is refused: $call");
}

# ---------------------------------------------------------------------------
# Break 2: wals_shard_route freed the ids read, which wals_shard_id_page
# read after it: the freed bytes with a small load, a crash with 100,000
# users.
for my $case ([ 'f', 10, 7 ], [ 'big', 100000, 100 ])
{
	my ($table, $nusers, $nitems) = @$case;
	($ret, $out, $err) = as_role(
		'mallory', qq{BEGIN;
SELECT wals_shard_load('mallory.$table', 'u', 'i', 'r', 'implicit');
SELECT length(wals_shard_ids());
SELECT wals_shard_plan('$params', 0, 2, $nusers, $nitems);
SELECT wals_shard_plan_page(0, @{[ page(0, $nusers) ]});
SELECT wals_shard_plan_page(1, @{[ page(1, $nitems) ]});
SELECT wals_shard_route();
SELECT length(wals_shard_id_page(0, 0, $nusers));
ROLLBACK;});
	like($err,
		qr/ERROR:  55000: cannot call wals_shard_id_page\(\) in state "routed" of a sharded training\nDETAIL:  Only wals_shard_outbox\(\), wals_shard_inbox\(\), wals_shard_start\(\) or wals_shard_end\(\) may be called in state "routed"\.\nHINT:  .*in the order of its protocol/,
		"break 2, $nusers users: the ids' page after the route is refused, naming the call and the state"
	);
	unlike($err, $crash, "break 2, $nusers users: no crash");
	server_back();
}

# ---------------------------------------------------------------------------
# Break 3: a view read by wals_shard_load ends the training it is read
# by; so does a row security policy.  Every call from inside a load is
# refused, and one caught there leaves the load and its training whole.
for my $source ('mallory.v_end', 'mallory.p')
{
	($ret, $out, $err) = as_role('mallory',
		"BEGIN; SELECT wals_shard_load('$source', 'u', 'i', 'r', 'implicit'); ROLLBACK;");
	like($err,
		qr/ERROR:  55006: cannot call wals_shard_end\(\) while wals_shard_load\(\) is running/,
		"break 3: $source, whose code ends the training, is refused while it is read");
	unlike($err, $crash, "break 3: $source: no crash");
	server_back();
}
for my $name (sort keys %inner)
{
	($ret, $out, $err) = as_role(
		'mallory', qq{BEGIN;
SELECT wals_shard_load('mallory.v_$name', 'u', 'i', 'r', 'implicit');
ROLLBACK;
BEGIN;
SELECT wals_shard_load('mallory.f', 'u', 'i', 'r', 'implicit');
SELECT wals_shard_load('mallory.t_$name', 'u', 'i', 'r', 'implicit');
SELECT encode(wals_shard_ids(), 'hex');
SELECT wals_shard_end() > 0;
COMMIT;});
	like($err, qr/ERROR:  55006: cannot call wals_shard_\w+\(\) while wals_shard_load\(\) is running/,
		"a view calling $inner{$name} inside a load is refused");
	is( $out,
		"50\n50\n" . ('0' x 14) . '64' . ('0' x 16) . ('0' x 14) . '0a' . ('0' x 14) . "07\nt",
		"caught inside the load, the refusal leaves the training whole: $name")
	  or diag($err);
	unlike($err, $crash, "a view calling $inner{$name}: no crash");
	server_back();
}

# ---------------------------------------------------------------------------
# Break 10: an empty partition's load freed a buffer it never had.  It
# reads no rows, and its training goes on.
($ret, $out, $err) = as_role(
	'mallory', q{BEGIN;
SELECT wals_shard_load('mallory.e', 'u', 'i', 'r', 'implicit');
SELECT wals_shard_load('mallory.e', 'u', 'i', NULL, 'explicit');
SELECT encode(wals_shard_ids(), 'hex');
SELECT wals_shard_end() > 0;
ROLLBACK;});
is($out, "0\n0\n" . ('0' x 64) . "\nt", 'break 10: an empty table loads no rows')
  or diag($err);
unlike($err, $crash, 'break 10: no crash');
server_back();

# ---------------------------------------------------------------------------
# Break 9: a plan of two billion users and items.  Nothing is sized by its
# counts before their pages come, so the backend's address space stays
# what it was; and with wals.max_memory set (by the DBA, for the role) the
# plan is refused before anything is allocated, as is a load past it.
my $plan_2e9 = qq{BEGIN;
SELECT wals_shard_load('mallory.f', 'u', 'i', 'r', 'implicit');
SELECT length(wals_shard_ids());
SELECT wals_shard_plan('$params', 0, 1, 2000000000, 2000000000);
ROLLBACK;};
my $planner = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'mallory' ]);
$planner->set_query_timer_restart;
my $pid = $planner->query_safe('SELECT pg_backend_pid()');
$planner->query(qq{BEGIN;
SELECT wals_shard_load('mallory.f', 'u', 'i', 'r', 'implicit');
SELECT wals_shard_plan('$params', 0, 1, 2000000000, 2000000000)
  FROM (SELECT wals_shard_ids()) i;});
is($planner->{stderr}, '', 'break 9: without wals.max_memory the plan is taken');
$planner->query(q{\set VERBOSITY verbose
SELECT wals_shard_plan_page(0, int8send(2000000000) || '\x00'::bytea);});
like($planner->{stderr}, qr/ERROR:  08P01: .*counts 2000000000 values where fewer follow/,
	'a plan page counting more ids than it holds is refused before anything is allocated');
my $peak = 0;
if (open(my $status, '<', "/proc/$pid/status"))
{
	($peak) = join('', <$status>) =~ /VmPeak:\s+(\d+) kB/;
	close $status;
}
ok($peak > 0 && $peak < 2 * 1024 * 1024,
	"break 9: and sizes nothing by its counts (the backend's peak address space: $peak kB)");
$planner->quit;
server_back();
$node->safe_psql('postgres', q{ALTER ROLE mallory SET wals.max_memory = '64MB'});
($ret, $out, $err) = as_role('mallory', $plan_2e9);
like($err,
	qr/ERROR:  53400: training needs about \d+ GB for the plan of a sharded training, more than wals.max_memory \(64 MB\)/,
	'break 9: with wals.max_memory the plan is refused before anything is allocated');
$node->safe_psql('postgres', q{ALTER ROLE mallory SET wals.max_memory = '1MB'});
($ret, $out, $err) = as_role('mallory',
	q{BEGIN; SELECT wals_shard_load('mallory.big', 'u', 'i', 'r', 'implicit'); ROLLBACK;});
like($err, qr/ERROR:  53400: training needs about .* more than wals.max_memory \(1024 kB\)/,
	'a load past wals.max_memory is refused');
$node->safe_psql('postgres', q{ALTER ROLE mallory RESET wals.max_memory});
server_back();

# ---------------------------------------------------------------------------
# The whole protocol by hand, in order, as a coordinator of two shards
# would call shard 0; then a call that fails while it changes the session
# (its start past wals.max_memory, f = 4096) leaves it failed, where only
# wals_shard_end remains.
my @protocol = (
	q{SELECT wals_shard_load('mallory.f', 'u', 'i', 'r', 'implicit')},
	q{SELECT length(wals_shard_ids())},
	qq{SELECT wals_shard_plan('$params', 0, 2, 10, 7)},
	q{SELECT wals_shard_plan_page(0, int8send(10) || (SELECT string_agg(int8send(g), '' ORDER BY g)
	  FROM generate_series(1, 10) g) || '\x00000000000101010101'::bytea)},
	q{SELECT wals_shard_plan_page(1, int8send(7) || (SELECT string_agg(int8send(g), '' ORDER BY g)
	  FROM generate_series(1, 7) g) || '\x00010001000100'::bytea)},
	q{SELECT wals_shard_route()},
	q{SELECT length(wals_shard_outbox(1, 1000))},
	q{SELECT wals_shard_start()},
	q{SELECT wals_shard_put(0, 0, 0, decode(repeat('3dcccccd', 20), 'hex'))},
	q{SELECT wals_shard_put(1, 0, 0, decode(repeat('3dcccccd', 16), 'hex'))},
	q{SELECT wals_shard_put(1, 1, 0, decode(repeat('3dcccccd', 12), 'hex'))},
	q{SELECT length(wals_shard_solve(0, 'x', decode(repeat('3dcccccd', 16), 'hex'), 100000))},
	q{SELECT wals_shard_put(0, 1, 0, decode(repeat('3dcccccd', 20), 'hex'))},
	q{SELECT length(wals_shard_solve(1, 'x', decode(repeat('3dcccccd', 16), 'hex'), 100000))},
	q{SELECT wals_shard_put(1, 1, 0, decode(repeat('3dcccccd', 12), 'hex'))},
	q{SELECT wals_shard_loss() IS NOT NULL},
	q{SELECT length(wals_shard_take(0, 0, 100))},
	q{SELECT length(wals_shard_rated(0, 1000)) > 0},
	q{SELECT wals_shard_end() > 0},);
($ret, $out, $err) =
  as_role('mallory', "\\set ON_ERROR_STOP on\nBEGIN;\n" . join(";\n", @protocol) . ";\nCOMMIT;");
is($ret, 0, 'the protocol by hand, in order, gives a result at every call') or diag($err);
is($out, "50\n32\n\n\n\n\n316\n25\n\n\n\n160\n\n144\n\nt\n80\nt\nt", 'and the answers of a shard');

(my $f4096 = $params) =~ s/^(\\x.{32}).{16}/$1 . sprintf('%016x', 4096)/e;
$node->safe_psql('postgres', q{ALTER ROLE mallory SET wals.max_memory = '10MB'});
($ret, $out, $err) = as_role(
	'mallory', join(";\n", 'BEGIN', @protocol[0 .. 1],
		qq{SELECT wals_shard_plan('$f4096', 0, 2, 10, 7)},
		@protocol[3 .. 5], 'SAVEPOINT s', 'SELECT wals_shard_start()',
		'ROLLBACK TO s', 'SELECT length(wals_shard_take(0, 0, 10))',
		'ROLLBACK TO s', 'SELECT wals_shard_end() > 0', 'COMMIT') . ';');
like($err,
	qr/ERROR:  53400: training needs about .* for the solvers of a sharded training.*ERROR:  55000: cannot call wals_shard_take\(\) in state "failed" of a sharded training\nDETAIL:  Only wals_shard_end\(\) may be called in state "failed"\.\nHINT:  A call failed while it changed the training/s,
	'a start failed midway leaves the training failed, where only its end is called');
like($out, qr/t$/, 'and ended');
$node->safe_psql('postgres', q{ALTER ROLE mallory RESET wals.max_memory});

# A parallel worker has no training: a function marked parallel safe that
# calls the shard functions, run in one, is refused there.  16 renamed
# force_parallel_mode debug_parallel_query.
my $force_parallel = $node->pg_version >= 16 ? 'debug_parallel_query' : 'force_parallel_mode';
($ret, $out, $err) = as_role(
	'mallory', qq{CREATE FUNCTION mallory.par() RETURNS bigint LANGUAGE plpgsql PARALLEL SAFE AS
  \$\$BEGIN RETURN wals_shard_load('mallory.f', 'u', 'i', 'r', 'implicit'); END\$\$;
SET $force_parallel = on;
SET parallel_leader_participation = off;
BEGIN;
SELECT mallory.par() FROM mallory.f LIMIT 1;
ROLLBACK;});
like($err, qr/ERROR:  25000: cannot call wals_shard_load\(\) during a parallel operation/,
	'a call from a parallel worker is refused');

# ---------------------------------------------------------------------------
# The fuzz: transactions of the protocol's calls in order, cut short at a
# random point, with random calls (random and malformed arguments, loads
# of every view above, savepoints rolled back or released) among them,
# each statement in a savepoint of its own (ON_ERROR_ROLLBACK) so that the
# training lives on past an error.  Seeded: the same calls every run.
srand(20251127);
sub pick { return $_[ int(rand(@_)) ] }
my @int = ('0', '1', '-1', '2', '3', '255', '256', '2147483647', '-2147483648', 'NULL');
my @bigint = (
	'0', '1', '-1', '7', '10', '100000', '2147483648', '4611686018427387904',
	'-9223372036854775808', '9223372036854775807', 'NULL');
my @source = (
	(map { "'mallory.$_'" } qw(f f f e p big nope), map { ("v_$_", "t_$_") } sort keys %inner),
	q{'pg_catalog.pg_class'}, q{''}, q{'"x'}, 'NULL');
sub bytes
{
	my $r = rand;
	return 'NULL' if $r < 0.05;
	return "'$params'::bytea" if $r < 0.2;
	my $hex = join('', map { sprintf('%02x', int(rand(256))) } 1 .. int(rand(40)));
	return "int8send(" . pick(@bigint[ 0 .. 9 ]) . ") || '\\x$hex'::bytea" if $r < 0.6;
	return "'\\x$hex'::bytea";
}
my %random = (
	load => sub {
		'wals_shard_load(' . join(', ', pick(@source), pick(q{'u'}, q{'u'}, q{'r'}, 'NULL'),
			pick(q{'i'}, q{'i'}, q{'u'}, 'NULL'), pick(q{'r'}, 'NULL', q{'i'}),
			pick(q{'implicit'}, q{'explicit'}, q{'x'}, 'NULL')) . ')'
	},
	ids => sub { 'wals_shard_ids()' },
	id_page => sub { 'wals_shard_id_page(' . join(', ', pick(@int), pick(@bigint), pick(@bigint)) . ')' },
	plan => sub {
		'wals_shard_plan(' . join(', ', bytes(), pick(@int), pick(@int), pick(@bigint), pick(@bigint)) . ')'
	},
	plan_page => sub { 'wals_shard_plan_page(' . pick(@int) . ', ' . bytes() . ')' },
	route => sub { 'wals_shard_route()' },
	outbox => sub { 'wals_shard_outbox(' . pick(@int) . ', ' . pick(@bigint) . ')' },
	inbox => sub { 'wals_shard_inbox(' . bytes() . ')' },
	start => sub { 'wals_shard_start()' },
	put => sub {
		'wals_shard_put(' . join(', ', pick(@int), pick(@int), pick(@bigint), bytes()) . ')'
	},
	solve => sub {
		'wals_shard_solve(' . join(', ', pick(@int), q{'x'}, bytes(), pick(@bigint)) . ')'
	},
	take => sub { 'wals_shard_take(' . join(', ', pick(@int), pick(@bigint), pick(@bigint)) . ')' },
	loss => sub { 'wals_shard_loss()' },
	rated => sub { 'wals_shard_rated(' . pick(@bigint) . ', ' . pick(@bigint) . ')' },
	end => sub { 'wals_shard_end()' },);
my @names = sort keys %random;
my $script = "\\set ON_ERROR_ROLLBACK on\n";
my $calls = 0;
while ($calls < 3000)
{
	my $depth = int(rand(@protocol + 1));
	$script .= "BEGIN;\n";
	for my $k (0 .. $depth - 1)
	{
		while (rand() < 0.3)
		{
			my $r = rand;
			$script .=
				$r < 0.1 ? "SAVEPOINT a;\n"
			  : $r < 0.15 ? "ROLLBACK TO SAVEPOINT a;\n"
			  : $r < 0.2 ? "RELEASE SAVEPOINT a;\n"
			  :            'SELECT ' . $random{ pick(@names) }->() . " IS NULL;\n";
			$calls++;
		}
		# a load of a view calling another function, caught or not
		$script .=
		  $k == 0 && rand() < 0.5
		  ? 'SELECT wals_shard_load('
		  . pick(map { ("'mallory.v_$_'", "'mallory.t_$_'") } sort keys %inner)
		  . ", 'u', 'i', 'r', 'implicit');\n"
		  : "$protocol[$k];\n";
		$calls++;
	}
	for (1 .. int(rand(10)))
	{
		$script .= 'SELECT ' . $random{ pick(@names) }->() . " IS NULL;\n";
		$calls++;
	}
	$script .= pick('COMMIT', 'ROLLBACK') . ";\n";
}
# psql dies with the server it talks to, where the code crashes.
eval { ($ret, $out, $err) = as_role('mallory', $script); 1 }
  or $err = "psql: $@: server closed the connection";
my %answers;
$answers{$1}++ while $err =~ /ERROR:  (\w{5}):/g;
note('fuzz: ' . join(', ', map { "$_ x$answers{$_}" } sort keys %answers));
my @internal = $err =~ /(ERROR:  XX\d\d\d.*)$/mg;
is(scalar(@internal), 0, "fuzz: $calls calls, no internal error") or diag(join("\n", @internal));
unlike($err, $crash, 'fuzz: no crash');
unlike($err, qr/ERROR:  (?!\w{5}: )/, 'fuzz: every error has its SQLSTATE');
ok($answers{'55006'} && $answers{'55000'},
	'fuzz: refusals of calls out of order and from inside loads among them');

# ---------------------------------------------------------------------------
server_back();
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
	$start_time, 'the server never restarted');
# A crash ends every session, and is no restart of the postmaster.
is(eval { $bystander->query_safe('SELECT pg_backend_pid()') } // 'gone',
	$bystander_pid, 'the bystander session lived through everything');
eval { $bystander->quit };
$node->stop;
done_testing();
