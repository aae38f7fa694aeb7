
# Parallel training: the number of workers changes nothing in the model,
# read or built by them, a training without workers to be had runs in the
# leader, another session sees how far a training got, a cancel stops
# leader and workers, and a worker killed with SIGKILL leaves the previous
# model serving after the server's crash recovery.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
max_worker_processes = 8
max_parallel_workers = 8
max_parallel_maintenance_workers = 2
restart_after_crash = on
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 500 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 3000) u, generate_series(1, 20) g;
CREATE TABLE big AS
  SELECT u AS user_id, (u * 7 + g * 13) % 2000 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 20000) u, generate_series(1, 50) g;
ANALYZE ratings, big;
});

# The md5 of the rated items of the users of model, by user.
sub rated_md5
{
	my ($model) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT md5(string_agg(md5(rated), '' ORDER BY user_id)) FROM ${model}_user_factors});
}

sub factors_md5
{
	my ($model) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT md5(string_agg(user_id || ':' || factors::text, ',' ORDER BY user_id)) FROM ${model}_user_factors;
SELECT md5(string_agg(item_id || ':' || factors::text, ',' ORDER BY item_id)) FROM ${model}_item_factors;
});
}

# ---------------------------------------------------------------------------
# The same model whatever the number of workers, both solvers.
for my $solver ('cg', 'cholesky')
{
	my %seen;
	for my $workers (0, 1, 2)
	{
		my $model = "w${workers}_$solver";
		my ($ret, $stdout, $stderr) = $node->psql(
			'postgres',
			qq{SELECT loss FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
			  model => '$model', factors => 16, iterations => 4, solver => '$solver',
			  workers => $workers);
			  SELECT workers FROM wals_models WHERE model = '$model'});
		is($ret, 0, "$solver, workers => $workers: trains");
		my ($loss, $launched) = split /\n/, $stdout;
		is($launched, $workers, "$solver: wals_models records $workers workers");
		like($stderr, qr/NOTICE:  model "public.$model" iteration 4 of 4\nDETAIL:  Loss [-0-9.e+]+ after [0-9.]+ s\./,
			"$solver, workers => $workers: each iteration is reported in a NOTICE");
		$seen{loss}{$loss}++;
		$seen{factors}{ factors_md5($model) }++;
	}
	is(scalar keys %{ $seen{loss} }, 1, "$solver: the same loss with 0, 1 and 2 workers");
	is(scalar keys %{ $seen{factors} }, 1,
		"$solver: the same factors, bit for bit, with 0, 1 and 2 workers");
}

# Five million ratings, some pairs repeated: the transpose to the matrix
# by user is taken by the workers beside the leader, and so are the
# starting factors (build_parallel.c) and the sorting of the rows of the
# matrix by item (build_rows.c), or, after a validation share, the
# transpose back, and the packing of the rated items as the leader writes
# the user factor table (store_pack.c), but for a validation share, which
# the leader joins back to them; the model is the one the leader alone
# builds, bit for bit, and its table the same, byte for byte.
$node->safe_psql('postgres', q{
CREATE TABLE five_million AS
  SELECT u AS user_id, (u * 7 + (g % 90) * 13) % 6000 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 50000) u, generate_series(1, 100) g;
ANALYZE five_million;});
for my $validation ('NULL', 0.1)
{
	my %seen;
	my $v = $validation ne 'NULL' ? ', a validation share' : '';
	for my $workers (2, 0)
	{
		my $model = "fm${workers}_" . ($v ? 'v' : 'all');
		my ($ret, $stdout, $stderr) = $node->psql('postgres', qq{SET client_min_messages = debug1;
		  SELECT loss FROM wals_train('five_million', 'user_id', 'item_id', 'rating',
		    model => '$model', factors => 32, iterations => 1, workers => $workers,
		    validation => $validation)});
		is($ret, 0, "five million$v, workers => $workers: trains");
		if ($workers)
		{
			like($stderr,
				qr/wals: renumbering the rows read and coding their ratings with [12] parallel workers/,
				"five million$v: the rows read are renumbered and coded by workers beside the leader");
			like($stderr, qr/wals: building the matrix by user with [12] parallel workers/,
				"five million$v: the matrix by user is built by workers beside the leader");
			like($stderr,
				qr/wals: scattering the rows read by item with [12] parallel workers/,
				"five million$v: the rows read, shared, are scattered by item by workers beside the leader");
			unlike($stderr, qr/sorting the partitions/,
				"five million$v: and the leader does not scatter them alone");
			like($stderr,
				qr/wals: the matrices' cells take 3 arrays of the rows read, their pages faulted in/,
				"five million$v: the matrices' cells go where the rows read were");
			if ($v)
			{
				# the 4 million cells left are too few for workers to transpose back
				unlike($stderr, qr/sorting the rows/,
					'five million, a validation share: the matrix by item is transposed back');
			}
			else
			{
				like($stderr,
					qr/wals: sorting the rows of the matrix by item with [12] parallel workers/,
					'five million: the rows of the matrix by item are sorted by workers');
				unlike($stderr, qr/building the matrix by item/,
					'five million: and it is not transposed back');
			}
			like($stderr, qr/wals: drawing the starting factors with [12] parallel workers/,
				'five million: the starting factors are drawn by workers too');
			if ($v)
			{
				unlike($stderr, qr/packing the rated items/,
					'five million, a validation share: the leader packs the rated items');
			}
			else
			{
				like($stderr, qr/wals: packing the rated items with [12] parallel workers/,
					'five million: the rated items are packed by workers');
			}
		}
		else
		{
			unlike($stderr,
				qr/building the matrix|sorting the|drawing the starting|packing the rated/,
				"five million$v, workers => 0: the leader builds, draws and packs alone");
			unlike($stderr, qr/arrays of the rows read/,
				"five million$v, workers => 0: the rows, in the leader's memory, are freed");
		}
		$seen{loss}{$stdout}++;
		$seen{factors}{ factors_md5($model) }++;
		$seen{rated}{ rated_md5($model) }++;
	}
	# workers asked for and none to be had: the leader takes every step
	my $none = $v ? 'fmnone_v' : 'fmnone';
	my ($ret, $stdout, $stderr) = $node->psql('postgres', qq{SET client_min_messages = debug1;
	  SET max_parallel_workers = 0;
	  SELECT loss FROM wals_train('five_million', 'user_id', 'item_id', 'rating',
	    model => '$none', factors => 32, iterations => 1, workers => 2,
	    validation => $validation)});
	is($ret, 0, "five million$v, no worker to be had: trains");
	like($stderr, qr/wals: building the matrix by user with 0 parallel workers/,
		"five million$v, no worker to be had: the leader takes every step of the build");
	$seen{loss}{$stdout}++;
	$seen{factors}{ factors_md5($none) }++;
	$seen{rated}{ rated_md5($none) }++;
	is(scalar keys %{ $seen{loss} }, 1, "five million$v: the same loss built with workers and without");
	is(scalar keys %{ $seen{factors} }, 1, "five million$v: the same factors, bit for bit");
	is(scalar keys %{ $seen{rated} }, 1, "five million$v: the same rated items, byte for byte");
}

# Rows past the planner's estimate, which sizes the shared segments the
# leader keeps its rows in, cannot stay there: they move to the leader's
# own memory, where it scatters them alone, the workers only sorting the
# partitions; the model is the same.
{
	my %seen;
	$seen{factors}{ factors_md5('fm0_all') }++;
	$node->safe_psql('postgres', q{UPDATE pg_class SET reltuples = reltuples / 4
	  WHERE oid = 'five_million'::regclass});
	my ($ret, $stdout, $stderr) = $node->psql('postgres', q{SET client_min_messages = debug1;
	  SELECT loss FROM wals_train('five_million', 'user_id', 'item_id', 'rating',
	    model => 'fm_past', factors => 32, iterations => 1, workers => 2)});
	is($ret, 0, 'five million past the estimate: trains');
	like($stderr, qr/wals: sorting the partitions of the matrix by item with [12] parallel workers/,
		'five million past the estimate: the leader scatters its own rows, the workers sort');
	unlike($stderr, qr/scattering the rows read|arrays of the rows read/,
		'five million past the estimate: the rows are no longer shared');
	$seen{factors}{ factors_md5('fm_past') }++;
	is(scalar keys %{ $seen{factors} }, 1, 'five million past the estimate: the same factors, bit for bit');
	$node->safe_psql('postgres', 'ANALYZE five_million');

	# shared rows that outgrow wals.max_memory as they are read go to
	# temporary files, the segments given back
	($ret, $stdout, $stderr) = $node->psql('postgres', q{SET client_min_messages = debug1;
	  SET wals.max_memory = '80MB';
	  SELECT loss FROM wals_train('five_million', 'user_id', 'item_id', 'rating',
	    model => 'fm_spill', factors => 32, iterations => 1, workers => 2)});
	is($ret, 0, 'five million, shared rows past wals.max_memory: trains');
	like($stderr, qr/the rows read go to temporary files from row \d+ on/,
		'five million, shared rows past wals.max_memory: the rows go to temporary files');
	$seen{factors}{ factors_md5('fm_spill') }++;
	is(scalar keys %{ $seen{factors} }, 1,
		'five million, shared rows past wals.max_memory: the same factors, bit for bit');
}

# Ratings of 5,000 distinct values, more than codes hold: the ranges the
# workers code cannot be merged into one codebook, and the training takes
# floats, the same as the leader alone takes them.
{
	my %seen;
	$node->safe_psql('postgres', q{CREATE TABLE five_million_floats AS
	  SELECT user_id, item_id, rating + (user_id % 1000) / 1000.0 AS rating FROM five_million;
	  ANALYZE five_million_floats});
	for my $workers (2, 0)
	{
		my ($ret, $stdout, $stderr) = $node->psql('postgres', qq{SET client_min_messages = debug1;
		  SELECT loss FROM wals_train('five_million_floats', 'user_id', 'item_id', 'rating',
		    model => 'fmf$workers', factors => 16, iterations => 1, workers => $workers)});
		is($ret, 0, "five million floats, workers => $workers: trains");
		like($stderr, qr/the ratings take floats, more distinct values than codes hold/,
			"five million floats, workers => $workers: the ratings take floats");
		like($stderr, qr/wals: renumbering the rows read and coding their ratings with [12] parallel workers/,
			'five million floats: the workers renumber the rows and try codes') if $workers;
		$seen{loss}{$stdout}++;
		$seen{factors}{ factors_md5("fmf$workers") }++;
	}
	is(scalar keys %{ $seen{loss} }, 1, 'five million floats: the same loss with workers and without');
	is(scalar keys %{ $seen{factors} }, 1, 'five million floats: the same factors, bit for bit');
}

# A user of 150,000 items, whose packing might not fit in a slot of the
# ring the workers pack into (2 MB, 14 bytes a rating at most), is packed
# by the leader itself, in the order of the rows: the table is the one the
# leader alone writes.  A retraining writes into the model's own table:
# the workers pack too, unless the table has a trigger or a check, whose
# code the leader, in parallel mode while workers run, could not let
# write; with a trigger that writes, the leader packs alone, and the
# trigger sees every row.
$node->safe_psql('postgres', q{
CREATE TABLE heavy AS
  SELECT 0 AS user_id, i AS item_id, 1 + i % 3 AS rating FROM generate_series(1, 150000) i
  UNION ALL
  SELECT u, (u * 11 + g * 17) % 150000 + 1, 1 + (u + g) % 5
  FROM generate_series(1, 31000) u, generate_series(1, 135) g;
ANALYZE heavy;
CREATE TABLE heavy_audit (user_id bigint);
CREATE FUNCTION heavy_audit() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS
  $$BEGIN INSERT INTO heavy_audit VALUES (NEW.user_id); RETURN NEW; END$$;});
{
	my %seen;
	for my $case ('heavy2', 'heavy0', 'heavy2 again', 'heavy2 with a trigger',
		'heavy2 with a check')
	{
		my ($model, $workers) = $case =~ /^(heavy(\d))/;
		my $before = '';
		$before = qq{CREATE TRIGGER audit BEFORE INSERT ON heavy2_user_factors
		  FOR EACH ROW EXECUTE FUNCTION heavy_audit();} if $case =~ /trigger/;
		$before = qq{DROP TRIGGER audit ON heavy2_user_factors;
		  ALTER TABLE heavy2_user_factors ADD CHECK (user_id >= 0);} if $case =~ /check/;
		my ($ret, $stdout, $stderr) = $node->psql('postgres', qq{$before
		  SET client_min_messages = debug1;
		  SELECT ratings FROM wals_train('heavy', 'user_id', 'item_id', 'rating',
		    model => '$model', factors => 4, iterations => 1, workers => $workers,
		    replace => true)});
		is($ret, 0, "$case: trains");
		is($stdout, 4335000, "$case: every rating");
		if ($case eq 'heavy2' || $case eq 'heavy2 again')
		{
			like($stderr, qr/wals: packing the rated items with [12] parallel workers/,
				"$case: the rated items are packed by workers");
		}
		else
		{
			unlike($stderr, qr/packing the rated/, "$case: the leader packs alone");
		}
		$seen{ rated_md5($model) }++;
	}
	is(scalar keys %seen, 1, 'heavy: the same rated items, byte for byte, packed by workers or not');
	is($node->safe_psql('postgres',
			q{SELECT length(rated) > 300000 FROM heavy2_user_factors WHERE user_id = 0}),
		't', 'heavy: the heavy user is stored whole');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM heavy_audit}),
		31001, 'heavy: the trigger saw every row of its retraining');
}

# A table of more than 4096 pages is read by workers beside the leader: the
# same model as read alone, every row with a null id counted, and an error
# in the rows a worker reads reaches the caller.
$node->safe_psql(
	'postgres', q{
CREATE TABLE wide (user_id int, item_id int, rating real) WITH (fillfactor = 10);
INSERT INTO wide SELECT u, (u * 7 + g * 13) % 300 + 1, 1 + (u + g) % 5
  FROM generate_series(1, 9000) u, generate_series(1, 12) g;
INSERT INTO wide SELECT CASE WHEN k % 2 = 0 THEN k END, CASE WHEN k % 2 = 1 THEN 1 END, 1
  FROM generate_series(1, 500) k;
ANALYZE wide;});
is($node->safe_psql('postgres', q{SELECT pg_relation_size('wide') / 8192 >= 4096}),
	't', 'the wide table has over 4096 pages');
{
	my %seen;
	for my $workers (0, 1, 2)
	{
		my ($ret, $stdout, $stderr) = $node->psql(
			'postgres',
			qq{SET client_min_messages = debug1;
			  SELECT loss FROM wals_train('wide', 'user_id', 'item_id', 'rating',
			    model => 'wide$workers', factors => 8, iterations => 2, workers => $workers)});
		is($ret, 0, "wide, workers => $workers: trains");
		if ($workers > 0)
		{
			like($stderr, qr/wals: reading "wide" with $workers parallel workers/,
				"wide, workers => $workers: the workers read beside the leader");
		}
		else
		{
			unlike($stderr, qr/parallel workers/, 'wide, workers => 0: the leader reads alone');
		}
		like($stderr, qr/skipped 500 rows of "wide" with a null user or item id/,
			"wide, workers => $workers: every row with a null id is counted");
		$seen{loss}{$stdout}++;
		$seen{factors}{ factors_md5("wide$workers") }++;
	}
	is(scalar keys %{ $seen{loss} }, 1, 'wide: the same loss read by 0, 1 and 2 workers');
	is(scalar keys %{ $seen{factors} }, 1, 'wide: the same factors, bit for bit');
}

# A refresh in a transaction rolled back, after settings, at DEBUG1: its
# exit code, its result, the md5 of the factors of table (by key) it left,
# and what it said.
sub refreshed
{
	my ($settings, $refresh, $table, $key) = @_;
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres', qq{$settings
		  SET client_min_messages = debug1;
		  BEGIN;
		  $refresh;
		  SELECT md5(string_agg($key || ':' || factors::text, ',' ORDER BY $key)) FROM $table;
		  ROLLBACK;});
	my ($result, $md5) = split /\n/, $stdout;
	return ($ret, $result, $md5, $stderr);
}

# Items that hold much of their source are refreshed from the whole source,
# read as a training reads it, by the workers beside the leader; the same
# factors as the leader alone gives, and as reading the items' ratings
# through a query, which a wals.max_memory too small for the whole source
# makes a refresh do.
{
	my %seen;
	for my $case ('2 workers', '0 workers', 'query')
	{
		my $workers = $case eq '2 workers' ? 2 : 0;
		my $limit = $case eq 'query' ? "SET wals.max_memory = '1MB';" : '';
		my ($ret, $stored, $md5, $stderr) = refreshed(
			"SET max_parallel_maintenance_workers = $workers; $limit",
			q{SELECT wals_refresh_items((SELECT array_agg(item_id) FROM wide0_item_factors), 'wide0')},
			'wide0_item_factors', 'item_id');
		is($ret, 0, "refresh of every item of wide, $case: runs");
		is($stored, 300, "refresh of every item of wide, $case: 300 items stored");
		if ($case eq 'query')
		{
			unlike($stderr, qr/skipped 500 rows/,
				'refresh of every item of wide, query: the source is not read whole');
		}
		else
		{
			like($stderr, qr/skipped 500 rows of "wide" with a null user or item id/,
				"refresh of every item of wide, $case: the source is read whole");
		}
		if ($workers > 0)
		{
			like($stderr, qr/wals: reading "wide" with 2 parallel workers/,
				"refresh of every item of wide, $case: the workers read beside the leader");
		}
		else
		{
			unlike($stderr, qr/parallel workers/,
				"refresh of every item of wide, $case: the leader reads alone");
		}
		$seen{$md5}++;
	}
	is(scalar keys %seen, 1, 'refresh of every item of wide: the same factors, bit for bit, read all three ways');
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres', q{SET client_min_messages = debug1;
		  BEGIN; SELECT wals_refresh_items('{1, 2, 3}', 'wide0'); ROLLBACK;});
	is($stdout, 3, 'refresh of three items of wide: stored');
	unlike($stderr, qr/skipped 500 rows|parallel workers/,
		'refresh of three items of wide: their ratings read through a query, not the whole source');
}

# Items whose systems are worth workers (about 2e9 operations: 108,000
# ratings at f = 160) are solved by the leader and the workers together,
# and so are the users of wals_refresh (3,000 users with a new rating each,
# solved exactly at f = 160, 2,048 to a batch): the same factors, bit for
# bit, as the leader alone.
$node->safe_psql(
	'postgres', q{
SELECT 1 FROM wals_train('wide', 'user_id', 'item_id', 'rating', model => 'wide_f160', factors => 160,
  iterations => 1, workers => 0);
CREATE TABLE many AS SELECT u AS user_id, (u * 7 + g * 13) % 300 + 1 AS item_id,
    (1 + (u + g) % 5)::real AS rating, 0 AS ts
  FROM generate_series(1, 3000) u, generate_series(1, 12) g;
SELECT 1 FROM wals_train('many', 'user_id', 'item_id', 'rating', factors => 160, iterations => 1,
  solver => 'cholesky', workers => 0, changed_col => 'ts');
INSERT INTO many SELECT u, (u * 11) % 300 + 1, 2, 1 FROM generate_series(1, 3000) u;});
for my $side ('items', 'users')
{
	my ($refresh, $table, $key, $rows, $solved) =
	  $side eq 'items'
	  ? (q{SELECT wals_refresh_items((SELECT array_agg(item_id) FROM wide_f160_item_factors), 'wide_f160')},
		'wide_f160_item_factors', 'item_id', 300, 300)
	  : (q{SELECT users FROM wals_refresh('many')}, 'many_user_factors', 'user_id', 2048, 3000);
	my %seen;
	for my $workers (2, 0)
	{
		my ($ret, $result, $md5, $stderr) =
		  refreshed("SET max_parallel_maintenance_workers = $workers;", $refresh, $table, $key);
		is($ret, 0, "refresh of $side at f = 160, $workers workers: runs");
		is($result, $solved, "refresh of $side at f = 160, $workers workers: $solved solved");
		if ($workers > 0)
		{
			like($stderr, qr/wals: solving the $side again, $rows rows, with 2 parallel workers/,
				"refresh of $side at f = 160: the workers solve beside the leader");
		}
		else
		{
			unlike($stderr, qr/parallel workers/, "refresh of $side at f = 160, no workers: the leader solves alone");
		}
		$seen{$md5}++;
	}
	is(scalar keys %seen, 1, "refresh of $side at f = 160: the same factors, bit for bit, with 2 workers and none");
}

# A cancel reaches a refresh that reads and solves with workers: a
# statement_timeout ends it, and the model is as it was.
{
	my $md5 = q{SELECT md5(string_agg(item_id || ':' || factors::text, ',' ORDER BY item_id))
	  FROM wide_f160_item_factors};
	my $before = $node->safe_psql('postgres', $md5);
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres', q{SET max_parallel_maintenance_workers = 2; SET statement_timeout = '30ms';
		  SELECT wals_refresh_items((SELECT array_agg(item_id) FROM wide_f160_item_factors), 'wide_f160')});
	isnt($ret, 0, 'refresh with workers under a statement_timeout of 30 ms: stopped');
	like($stderr, qr/canceling statement due to statement timeout/,
		'refresh with workers under a statement_timeout: the cancel is what stopped it');
	is($node->safe_psql('postgres', $md5), $before, 'refresh cancelled: the item factors are as they were');
}

# Ratings of few distinct values take one-byte codes, in the leader and in
# the workers, in memory and out of core.  Repeats that sum to more values
# than codes hold make the training give them up, shared segments (or
# temporary files) and all, and train what the same ratings merged
# beforehand, as floats, train.
{
	$node->safe_psql(
		'postgres', q{
		CREATE TABLE coded AS
			SELECT u AS user_id, i AS item_id, ((u * 7 + i) % 200 + 1)::real AS rating
			FROM generate_series(1, 400) u, generate_series(1, 60) i;
		CREATE TABLE uncoded AS SELECT * FROM coded;
		INSERT INTO uncoded SELECT user_id, item_id, 1000 FROM coded WHERE user_id % 2 = 0;
		CREATE TABLE floats AS
			SELECT user_id, item_id, sum(rating) AS rating FROM uncoded GROUP BY 1, 2;
	});
	my %says = (
		coded => qr/the ratings take one-byte codes, 200 distinct values/,
		uncoded => qr/the ratings take one-byte codes, 201 distinct values.*\n(.*\n)*.*the ratings take floats, their repeats merged into more distinct values than codes hold/,
		floats => qr/the ratings take floats, more distinct values than codes hold/);
	my %md5;
	for my $table ('coded', 'uncoded', 'floats')
	{
		for my $workers (0, 2)
		{
			# and out of core, the cells in temporary files
			for my $limit (0, 256)
			{
				my $model = $table . $workers . ($limit ? '_files' : '');
				my ($ret, $stdout, $stderr) = $node->psql(
					'postgres',
					qq{SET client_min_messages = debug1;
					  SET wals.max_memory = $limit;
					  SELECT ratings FROM wals_train('$table', 'user_id', 'item_id', 'rating',
					    model => '$model', factors => 8, iterations => 2, workers => $workers)});
				is($ret, 0, "$model: trains");
				like($stderr, $says{$table}, "$model: the ratings take what they should");
				if ($limit)
				{
					like($stderr, qr/, in temporary files/, "$model: out of core");
				}
				else
				{
					unlike($stderr, qr/in temporary files/, "$model: in memory");
				}
				$md5{$table}{ factors_md5($model) }++;
			}
		}
		is(scalar keys %{ $md5{$table} }, 1,
			"$table: the same factors with 0 and 2 workers, in memory and out of core");
	}
	is(factors_md5('uncoded0'), factors_md5('floats0'),
		'codes given up train what floats train');
	$node->safe_psql('postgres',
		q{UPDATE wide SET rating = 'NaN' WHERE user_id % 700 = 0; VACUUM wide;});
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres',
		q{SELECT FROM wals_train('wide', 'user_id', 'item_id', 'rating',
		    model => 'wide_bad', factors => 8, iterations => 1, workers => 2)});
	like($stderr, qr/column "rating" given as "rating_col" contains the non-finite rating NaN/,
		'a rating refused in any process stops the training with its error');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_models WHERE model = 'wide_bad'}),
		'0', 'and stores nothing');
}

# Out of core, the temporary files go where temp_tablespaces says, as a
# sort's do, and are logged and deleted there when the training ends.
{
	my $log_at = -s $node->logfile;
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres',
		q{SET allow_in_place_tablespaces = on;
		  CREATE TABLESPACE scratch LOCATION '';
		  SET temp_tablespaces = scratch;
		  SET log_temp_files = 0;
		  SET wals.max_memory = 256;
		  SELECT ratings FROM wals_train('coded', 'user_id', 'item_id', 'rating',
		    model => 'in_scratch', factors => 8, iterations => 2, workers => 2)});
	is($ret, 0, 'out of core with temp_tablespaces: trains') or diag($stderr);
	my $log = slurp_file($node->logfile, $log_at);
	like($log, qr/temporary file: path "pg_tblspc\/\d+\/[^"]*pgsql_tmp[^"]*", size [1-9]/,
		'the files were in the temporary tablespace, and logged with their size');
	unlike($log, qr/temporary file: path "base\//, 'and none in the default one');
	is(factors_md5('in_scratch'), factors_md5('coded0'), 'the same factors');
	is($node->safe_psql('postgres',
			q{SELECT count(*) FROM pg_ls_tmpdir((SELECT oid FROM pg_tablespace WHERE spcname = 'scratch'))}),
		'0', 'no file is left there');
	$node->safe_psql('postgres', q{SELECT wals_drop_model('in_scratch')});
	$node->safe_psql('postgres', q{DROP TABLESPACE scratch});
}

# Rows that fit in wals.max_memory where the matrices and the factors do
# not go to temporary files once read, before the matrices are built.
{
	$node->safe_psql(
		'postgres', q{
		CREATE TABLE fits AS
			SELECT g % 20000 AS user_id, (g / 20000 * 37 + g % 20000 * 11) % 5000 AS item_id,
			       (1 + g % 5)::real AS rating
			FROM generate_series(1::bigint, 2000000) g;
		ANALYZE fits;
	});
	my %seen;
	for my $limit (0, 40960)
	{
		my ($ret, $stdout, $stderr) = $node->psql(
			'postgres',
			qq{SET client_min_messages = debug1;
			  SET wals.max_memory = $limit;
			  SELECT ratings FROM wals_train('fits', 'user_id', 'item_id', 'rating',
			    model => 'fits$limit', factors => 256, iterations => 1, workers => 0)});
		is($ret, 0, "fits, wals.max_memory = $limit kB: trains") or diag($stderr);
		if ($limit)
		{
			unlike($stderr, qr/the rows read go to temporary files/, 'the rows were read in memory');
			like($stderr, qr/distinct values, in temporary files/, 'and the matrices built out of core');
		}
		$seen{ factors_md5("fits$limit") }++;
	}
	is(scalar keys %seen, 1, 'fits: the same factors');
}

# With no worker to be had, the leader trains alone and says so.
{
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres',
		q{SET max_parallel_workers = 0;
		  SELECT FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
		    model => 'alone', factors => 16, iterations => 4, workers => 2);
		  SELECT workers FROM wals_models WHERE model = 'alone'});
	is($ret, 0, 'a training without workers to be had succeeds');
	like($stderr, qr/no parallel worker could be launched; model "public.alone" trains in the leader alone/,
		'and says it trains in the leader alone');
	is($stdout, 0, 'wals_models records 0 workers');
	is(factors_md5('alone'), factors_md5('w0_cg'), 'and trains the same model');
}

# ---------------------------------------------------------------------------
# A long training: another session sees its progress and its workers; a
# cancel ends the leader and the workers.
my $long_training = q{SELECT * FROM wals_train('big', 'user_id', 'item_id', 'rating',
  model => 'k', factors => 64, iterations => 10000, workers => 2, replace => true)};

$node->safe_psql('postgres',
	q{SELECT * FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
	  model => 'k', factors => 16, iterations => 5)});
my $recs_sql = q{SELECT u, r.ord, r.item_id, r.score
  FROM generate_series(1, 10) u,
       LATERAL wals_recommend(u, 5, 'k') WITH ORDINALITY r(item_id, score, ord)
  ORDER BY u, r.ord};
my $recs = $node->safe_psql('postgres', $recs_sql);
my $version = $node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'k'});

my $bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 180);
$bg->set_query_timer_restart;
my $pid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_until(qr/starting/, "\\echo starting\n$long_training;\n");

ok( $node->poll_query_until(
		'postgres', qq{SELECT query ~ '^wals_train: model "public.k", iteration [2-9][0-9]* of 10000, '
		  FROM pg_stat_activity WHERE pid = $pid}),
	'pg_stat_activity shows the iteration the training is at');
like(
	$node->safe_psql('postgres', "SELECT query FROM pg_stat_activity WHERE pid = $pid"),
	qr/loss [-0-9.e+]+ after iteration \d+ \([0-9.]+ s\)/,
	'and the loss and seconds of the last iteration');
is( $node->safe_psql(
		'postgres', qq{SELECT count(*) FROM pg_stat_activity
		  WHERE leader_pid = $pid AND backend_type = 'parallel worker'}),
	2,
	'two parallel workers run beside the leader');

my $start = time;
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
my $seen = eval {
	pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr},
		qr/canceling statement due to user request/);
};
ok($seen, 'a cancel ends the parallel training') or diag("stderr: $bg->{stderr}; $@");
ok( $node->poll_query_until(
		'postgres', qq{SELECT count(*) = 0 FROM pg_stat_activity WHERE leader_pid = $pid}),
	'and its workers');
note(sprintf('leader and workers ended %.2f s after the cancel', time - $start));
$bg->{stderr} = '';
is($node->safe_psql('postgres', $recs_sql), $recs, 'the previous model still serves');

# ---------------------------------------------------------------------------
# A worker killed with SIGKILL: the postmaster restarts the cluster, as after
# any backend crash, and the previous model serves afterwards.
$bg->query_until(qr/starting/, "\\echo starting\n$long_training;\n");
ok( $node->poll_query_until(
		'postgres', qq{SELECT count(*) = 2 FROM pg_stat_activity
		  WHERE leader_pid = $pid AND backend_type = 'parallel worker'
		    AND (SELECT query FROM pg_stat_activity WHERE pid = $pid) ~ 'iteration [2-9]'}),
	'a second long training runs with its workers');
my $worker = $node->safe_psql(
	'postgres', qq{SELECT pid FROM pg_stat_activity
	  WHERE leader_pid = $pid AND backend_type = 'parallel worker' LIMIT 1});
my $log_offset = -s $node->logfile;
ok(kill('KILL', $worker), "SIGKILL to parallel worker $worker");
eval { pump_until($bg->{run}, $bg->{timeout}, \$bg->{stderr}, qr/server closed the connection|terminating connection|connection to server was lost/); };
eval { $bg->quit; };
# While the server restarts, a psql may end before it reads its query, and
# IPC::Run, writing it, dies of the broken pipe (poll_query_until does not
# catch that): each try is caught.
my $back = 0;
for my $try (1 .. 1800)
{
	$back = eval { $node->safe_psql('postgres', 'SELECT 1') eq '1' };
	last if $back;
	Time::HiRes::usleep(100_000);
}
ok($back, 'the server accepts connections again');
ok( $node->log_contains(qr/terminated by signal 9: Killed/, $log_offset),
	'the server log records the killed worker');
is($node->safe_psql('postgres', $recs_sql), $recs,
	'after recovery the previous model serves the same recommendations');
is($node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'k'}),
	$version, 'and its version is unchanged');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM pg_class WHERE relname LIKE 'k\_%' AND relkind = 'r'}),
	2, 'no half-written factor table is left');

$node->stop;
done_testing();
