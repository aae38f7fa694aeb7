
# Every SQL example of README.md and doc/*.md runs, so that no document
# lies.  Each ```sql block of a document runs in the document's order, in one
# psql session per document, in a database of its own set up first with
# the fixtures the document's examples take for granted (%fixtures_of): a
# sample of 200 users rating about 20 of 100 items each, generated in SQL,
# as the table ratings with the columns the documents name, the held-out
# tables, users and items, a trained model, a schema shop with its own; so
# a block may use what an earlier block of the same document made.  A block
# that shows a file of examples/ (the link just above it, as
# Recipes.pm checks) is run from that file by the test that names it.  A
# mark, an HTML comment on the line just before a block, says what else to
# do with it (DEVELOPERS.md lists the marks); a block with no mark passes
# when none of its statements fails.  A fenced block without a language is
# refused, so that no SQL hides in one, and so is a block that psql never
# reached (it stops when it loses its connection).  Before the documents,
# the same check runs on a document of its own making, to show that it
# fails where it must.
use strict;
use warnings FATAL => 'all';

use FindBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$FindBin::RealBin/../..";

# ---------------------------------------------------------------------------
# The fixtures, by name: what the documents' examples take for granted.
# The sample is fixture.cells: 200 users (ids 1 to 200, user 42 among them)
# and 100 items (ids 1 to 99 and 1234, which the documents name), each cell
# kept or not by a hash, in part 0 (the ratings), 1 (held out for testing)
# or 2 (for validation), about 4,000 cells each; a training on part 0 takes
# a tenth of a second.  shards makes ratings a table partitioned by user
# over two foreign tables of postgres_fdw, in two databases of the same
# server with wals (doc_shard1, doc_shard2), each read by one process, so
# that a training of it trains on those shards.
my %fixture = (
	sample => q{
CREATE SCHEMA fixture;
CREATE TABLE fixture.cells AS
SELECT u::bigint AS user_id, (CASE WHEN i = 100 THEN 1234 ELSE i END)::bigint AS item_id,
       (1 + abs(hashint4(u * 7919 + i)) % 5)::real AS rating,
       abs(hashint4(u * 104729 + i)) % 5 AS part
FROM generate_series(1, 200) u, generate_series(1, 100) i;
DELETE FROM fixture.cells WHERE part > 2;
},
	wals => q{CREATE EXTENSION wals;},
	ratings => q{
CREATE TABLE ratings (user_id bigint, item_id bigint, rating real);
INSERT INTO ratings SELECT user_id, item_id, rating FROM fixture.cells WHERE part = 0;
},
	held_out => q{
CREATE TABLE ratings_train AS SELECT user_id, item_id, rating FROM fixture.cells WHERE part = 0;
CREATE TABLE ratings_test AS SELECT user_id, item_id, rating FROM fixture.cells WHERE part = 1;
CREATE TABLE ratings_validation AS SELECT user_id, item_id, rating FROM fixture.cells WHERE part = 2;
},
	catalog => q{
CREATE TABLE users AS
SELECT u::bigint AS id, CASE WHEN u % 4 = 0 THEN 'new' ELSE 'regular' END AS segment
FROM generate_series(1, 200) u;
CREATE TABLE items AS SELECT DISTINCT item_id AS id, item_id % 3 <> 0 AS in_stock FROM fixture.cells;
},
	model => q{
SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'ratings');
},
	shop => q{
CREATE SCHEMA shop;
CREATE TABLE shop.ratings AS SELECT user_id, item_id, rating FROM fixture.cells WHERE part = 0;
SELECT model FROM wals_train('shop.ratings', 'user_id', 'item_id', 'rating', model => 'shop.ratings');
},
	shards => q{
\set doc :DBNAME
SELECT split_part(current_setting('unix_socket_directories'), ',', 1) AS host,
       current_setting('port') AS port \gset
CREATE DATABASE doc_shard1;
CREATE DATABASE doc_shard2;
\connect doc_shard1
CREATE EXTENSION wals;
CREATE TABLE ratings_part (user_id bigint NOT NULL, item_id bigint NOT NULL, rating real NOT NULL);
\connect doc_shard2
CREATE EXTENSION wals;
CREATE TABLE ratings_part (user_id bigint NOT NULL, item_id bigint NOT NULL, rating real NOT NULL);
\connect :doc
ALTER DATABASE doc_shard1 SET max_parallel_maintenance_workers = 0;
ALTER DATABASE doc_shard2 SET max_parallel_maintenance_workers = 0;
CREATE EXTENSION postgres_fdw;
CREATE SERVER shard1 FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host :'host', port :'port', dbname 'doc_shard1', batch_size '1000');
CREATE SERVER shard2 FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host :'host', port :'port', dbname 'doc_shard2', batch_size '1000');
CREATE USER MAPPING FOR CURRENT_USER SERVER shard1;
CREATE USER MAPPING FOR CURRENT_USER SERVER shard2;
CREATE TABLE ratings (user_id bigint NOT NULL, item_id bigint NOT NULL, rating real NOT NULL)
  PARTITION BY RANGE (user_id);
CREATE FOREIGN TABLE ratings_1 PARTITION OF ratings FOR VALUES FROM (MINVALUE) TO (100)
  SERVER shard1 OPTIONS (table_name 'ratings_part');
CREATE FOREIGN TABLE ratings_2 PARTITION OF ratings FOR VALUES FROM (100) TO (MAXVALUE)
  SERVER shard2 OPTIONS (table_name 'ratings_part');
INSERT INTO ratings SELECT user_id, item_id, rating FROM fixture.cells WHERE part = 0;
},);

# The fixtures of each document, in order; the documents not named take
# those of "default", and a block marked "new database" starts one with
# those of "new database".
my %fixtures_of = (
	'README.md' => [qw(sample ratings)],
	'doc/operations.md' => [qw(sample)],
	'doc/security.md' => [qw(sample wals shop)],
	'doc/serving.md' => [qw(sample wals ratings catalog model)],
	'doc/sharding.md' => [qw(sample wals shards)],
	'doc/training.md' => [qw(sample wals held_out shop)],
	'default' => [qw(sample wals ratings model)],
	'new database' => [qw(sample wals)],);

# What stands for the line of a placeholder comment, "-- ... what ...", in
# a block.
my %placeholder = (qr/load your interactions/ =>
	  q{INSERT INTO ratings SELECT user_id, item_id, rating FROM fixture.cells WHERE part = 0;});

# ---------------------------------------------------------------------------
# Reading a document.

# The fenced blocks of the document $name whose text is $text: a list of
# { line, lang, text, mark, shows }, where line is the opening fence's,
# text the block's lines without the fence's indentation, mark what the
# mark just above it says, and shows the file of examples/ it shows; and a
# list of the document's faults (a mark above no block, a block without a
# language, a fence left open).
sub blocks_of
{
	my ($name, $text) = @_;
	my @lines = split /\n/, $text, -1;
	my (@blocks, @faults);
	for (my $n = 0; $n < @lines; $n++)
	{
		if ($lines[$n] =~ /^\s*<!-- example:/)
		{
			push @faults, [ $n + 1, "a mark must be one line, <!-- example: ... -->" ]
			  unless $lines[$n] =~ /^\s*<!-- example: (.+?) -->\s*$/;
			push @faults, [ $n + 1, "a mark that no fenced block follows" ]
			  unless $n + 1 < @lines && $lines[ $n + 1 ] =~ /^\s*```/;
			next;
		}
		next unless $lines[$n] =~ /^(\s*)(```+)(\S*)\s*$/;
		my ($indent, $fence, $lang) = (length $1, $2, $3);
		my $block = { line => $n + 1, lang => $lang };
		$block->{mark} = $1
		  if $n > 0 && $lines[ $n - 1 ] =~ /^\s*<!-- example: (.+?) -->\s*$/;
		$block->{shows} = $1
		  if $n > 1
		  && $lines[ $n - 1 ] eq ''
		  && $lines[ $n - 2 ] =~ m{\]\((?:\.\./)?examples/([^)]+)\):$};
		my @body;
		for ($n++; $n < @lines && $lines[$n] !~ /^\s*\Q$fence\E\s*$/; $n++)
		{
			push @body, $lines[$n] =~ s/^ {0,$indent}//r;
		}
		if ($n >= @lines)
		{
			push @faults, [ $block->{line}, "a fence that is never closed" ];
			last;
		}
		$block->{text} = join("\n", @body) . "\n";
		push @faults, [ $block->{line}, "a fenced block without a language: "
		  . "write ```sql for SQL, ```text for output, ```sh for commands" ]
		  if $lang eq '';
		push @blocks, $block;
	}
	return (\@blocks, \@faults);
}

# The tests of test/t/ that run the file $file of examples/: those that
# name, at the start of a string, its folder (postgres_fdw/, citus/,
# pg_cron/) or, for a file at the top, the file.
sub recipe_tests
{
	my ($file) = @_;
	my $key = $file =~ m{^(.*/)} ? $1 : $file;
	return map { s{^\Q$root/test/\E}{}r }
	  grep { !m{/\Q$FindBin::Script\E$} && slurp_file($_) =~ /['"]\Q$key\E/ } sort glob("$root/test/t/*.pl");
}

# What to do with the SQL block $block: a hash of action (run, skip,
# fault), and for run: sql (the statements, with placeholders filled and
# replacements made), error (the SQLSTATE it must fail with, if any), new
# (whether it starts a new database); for skip and fault: why.
sub plan_block
{
	my ($block) = @_;
	my $sql = $block->{text};
	my $mark = $block->{mark} // '';
	my %plan = (action => 'run', error => undef, new => 0);

	if (defined $block->{shows})
	{
		my @tests = recipe_tests($block->{shows});
		return (action => 'fault', why => "shows examples/$block->{shows}, which no test of test/t runs")
		  unless @tests;
		return (action => 'fault', why => "shows examples/$block->{shows}, which its tests run: it needs no mark")
		  if $mark ne '';
		return (action => 'skip', why => "shows examples/$block->{shows}, run by " . join(', ', @tests));
	}
	if ($mark =~ /^skip (.*)$/)
	{
		my $why = $1;
		my @named = $why =~ m{\b((?:test/)?t/\w+\.pl|test/sql/\w+\.sql)\b}g;
		return (action => 'fault', why => "a skip must name the test that runs it, a file of test/t or test/sql")
		  unless @named;
		my @missing = grep { !-f (m{^test/} ? "$root/$_" : "$root/test/$_") } @named;
		return (action => 'fault', why => "a skip names a test that does not exist: @missing") if @missing;
		return (action => 'skip', why => $why);
	}
	return (action => 'skip', why => 'sketch') if $mark eq 'sketch';
	if ($mark =~ /^error ([0-9A-Z]{5})$/)
	{
		$plan{error} = $1;
	}
	elsif ($mark =~ /^replace (.+?) with (.+)$/)
	{
		my ($old, $new) = ($1, $2);
		my $count = () = $sql =~ /\Q$old\E/g;
		return (action => 'fault', why => "\"replace $old\": the block holds it $count times, not once")
		  unless $count == 1;
		$sql =~ s/\Q$old\E/$new/;
	}
	elsif ($mark eq 'new database')
	{
		$plan{new} = 1;
	}
	elsif ($mark ne '')
	{
		return (action => 'fault', why => "an unknown mark \"$mark\"");
	}

	my @unknown;
	$sql =~ s{^(\s*)--\s*\.\.\.\s*(.*?)\s*\.\.\.\s*$}{
		my ($indent, $what) = ($1, $2);
		my ($fill) = map { $placeholder{$_} } grep { $what =~ $_ } keys %placeholder;
		push @unknown, $what unless defined $fill;
		$indent . ($fill // '');
	}gme;
	return (action => 'fault', why => "an unknown placeholder \"-- ... $unknown[0] ...\": mark it a sketch")
	  if @unknown;
	my $last = (grep { !/^\s*(?:--.*)?$/ } split /\n/, $sql)[-1] // '';
	return (action => 'fault', why => 'it ends without a semicolon')
	  unless $last =~ /;\s*(?:--.*)?$/;
	$plan{sql} = $sql;
	return %plan;
}

# ---------------------------------------------------------------------------
# Running a document.

# The name of the database of the document $name: doc_ and the file's name.
sub database_of
{
	my ($name) = @_;
	return 'doc_' . lc($name =~ s{^.*/}{}r =~ s/\.md$//r =~ s/\W/_/gr);
}

# The psql script that sets up the fixtures named in @$names, each step
# announced on standard error with $tag.
sub fixture_script
{
	my ($tag, $names) = @_;
	return join('', map { "\\warn '@\@step $tag $_'\n$fixture{$_}\n" } @$names);
}

# The line of the document a result is about; 0 for its fixtures.
sub line_of
{
	my ($result) = @_;
	return $result->{where} =~ /:(\d+)$/ ? $1 : 0;
}

# Check the document $name, whose text is $text, on $node: returns a list
# of results { where, status (ok, fail, skip), why }, one a block and one a
# fault.  The SQL blocks to run, with the fixtures before them, go to one
# psql in the document's database, each step announced on standard error
# (\warn), so that the errors that follow an announcement are that step's;
# errors carry their SQLSTATE (VERBOSITY verbose).
sub check_document
{
	my ($node, $name, $text) = @_;
	my ($blocks, $faults) = blocks_of($name, $text);
	my @results = map { { where => "$name:$_->[0]", status => "fail", why => $_->[1] } } @$faults;
	push @results,
	  map { { where => "$name:$_->{line}", status => 'fail', why => "a mark above a block of $_->{lang}, not SQL" } }
	  grep { $_->{lang} ne 'sql' && defined $_->{mark} } @$blocks;
	push @results, map { { where => "$name:$_->{line}", status => 'other', why => "$_->{lang}, not SQL" } }
	  grep { $_->{lang} !~ /^(?:sql|)$/ && !defined $_->{mark} } @$blocks;
	my @sql = grep { $_->{lang} eq 'sql' } @$blocks;
	return @results unless @sql;

	my $db = database_of($name);
	my $fixtures = $fixtures_of{$name} // $fixtures_of{default};
	my $script = "\\set VERBOSITY verbose\n" . fixture_script($name, $fixtures);
	my (%step, $databases);
	for my $block (@sql)
	{
		my $where = "$name:$block->{line}";
		my %plan = plan_block($block);
		if ($plan{action} ne 'run')
		{
			push @results,
			  { where => $where, status => $plan{action} eq 'skip' ? 'skip' : 'fail', why => $plan{why} };
			next;
		}
		if ($plan{new})
		{
			my $new = $db . '_' . ++$databases;
			$script .= "\\warn '@\@step $where new database'\nCREATE DATABASE $new;\n\\connect $new\n"
			  . "\\set VERBOSITY verbose\n"
			  . fixture_script($where, $fixtures_of{'new database'});
		}
		$script .= "\\warn '@\@step $where'\n$plan{sql}";
		$step{$where} = { %plan, result => { where => $where, status => 'ok', why => '' } };
		push @results, $step{$where}{result};
	}
	$script .= "\\warn '@\@end'\n";

	$node->safe_psql('postgres', "CREATE DATABASE $db");
	my ($stdout, $stderr) = ('', '');
	IPC::Run::run([ $node->installed_command('psql'), '-X', '-q', '-d', $node->connstr($db) ],
		'<', \$script, '>', \$stdout, '2>', \$stderr);

	# The errors of each step, and psql's own.
	my (%errors, %seen, $current);
	$current = "$name fixtures";
	for (split /\n/, $stderr)
	{
		if (/^@\@step (\S+)(.*)$/)
		{
			$current = $2 eq '' ? $1 : "$1$2";
			$seen{$current} = 1;
			next;
		}
		push @{ $errors{$current} }, [ $1, $2 ]
		  if /^(?:psql:[^:]*:\d+: )?(?:ERROR|FATAL|PANIC):  ([0-9A-Z]{5}): (.*)$/;
		push @{ $errors{$current} }, [ 'psql', $_ ]
		  if /^psql:[^:]*:\d+: error: / || /^psql: error: /
		  || /server closed the connection unexpectedly|connection to server .* failed/;
	}
	for my $at (sort keys %errors)
	{
		my $errors = $errors{$at};
		my $step = $step{$at};
		my $said = join('; ', map { "$_->[0]: $_->[1]" } @$errors);
		if (!defined $step)
		{
			push @results, { where => $at, status => 'fail', why => "the fixtures fail: $said" };
		}
		elsif (!defined $step->{error})
		{
			@{ $step->{result} }{qw(status why)} = ('fail', $said);
		}
		elsif (grep { $_->[0] ne $step->{error} } @$errors)
		{
			@{ $step->{result} }{qw(status why)} = ('fail', "expected $step->{error}, got $said");
		}
		else
		{
			$step->{result}{why} = "fails with $step->{error}, as it must";
		}
	}
	# A step that psql never reached (a lost connection ends it) has failed.
	my $said = join(" ", grep { defined && !/^\@\@/ } (split /\n/, $stderr)[-3 .. -1]);
	for my $step (grep { !$seen{ $_->{result}{where} } } values %step)
	{
		@{ $step->{result} }{qw(status why)} = ('fail', "psql stopped before it: $said");
	}
	push @results, { where => $name, status => 'fail', why => "psql stopped: $said" }
	  unless $stderr =~ /^\@\@end$/m;
	for my $step (grep { defined $_->{error} && $seen{ $_->{result}{where} } } values %step)
	{
		next if $errors{ $step->{result}{where} };
		@{ $step->{result} }{qw(status why)} = ('fail', "expected $step->{error}, but it succeeds");
	}
	return sort { line_of($a) <=> line_of($b) } @results;
}

# ---------------------------------------------------------------------------

my $node = PostgreSQL::Test::Cluster->new('doc_examples');
$node->init;
$node->append_conf('postgresql.conf', "client_min_messages = warning\n");
$node->start;
# The role that security.md grants a model's tables to.
$node->safe_psql('postgres', 'CREATE ROLE app');

# The check itself, on a document of its own: a block that fails fails,
# one marked with an SQLSTATE must fail with it, a mark above no block, a
# block without a language and an unknown mark are faults; the rest pass
# or are skipped as marked, and the blocks share the document's session.
my $self = <<'DOC';
```sql
CREATE TABLE kept (a int);
SELECT * FROM wals_recommend(42, 10, model => 'ratings');
```
<!-- example: error 42P01 -->
```sql
SELECT * FROM missing;
```
<!-- example: error 42P01 -->
```sql
SELECT * FROM kept;
```
<!-- example: error 42P01 -->
```sql
SELECT 1/0;
```
```sql
SELECT 1/0;
```
<!-- example: skip needs nothing -->
```sql
SELECT 1;
```
<!-- example: skip run by t/009_cron.pl -->
```sql
SELECT 1;
```
<!-- example: sketch -->
```sql
SELECT ... ;
```
<!-- example: replace 1/0 with 1/1 -->
```sql
SELECT 1/0;
```
<!-- example: new database -->
```sql
CREATE TABLE ratings (user_id bigint, item_id bigint, rating real);
-- ... load your interactions: anything ...
SELECT 1 / (count(*) = 4018)::int FROM ratings;
```
<!-- example: shout -->
```sql
SELECT 1;
```
```
SELECT 1;
```
```sql
SELECT 1
```
<!-- example: skip run by t/009_cron.pl -->

- a list item:

  ```sql
  SELECT 1;

  SELECT 2;
  ```
<!-- example: sketch -->
```text
output
```
```sql
\q
SELECT 1;
```
```sql
SELECT 1;
```
DOC
my %expect = (
	1 => "ok", 6 => "ok", 10 => "fail", 14 => "fail", 17 => "fail", 21 => "fail", 25 => "skip",
	29 => "skip", 33 => "ok", 37 => "ok", 43 => "fail", 46 => "fail", 49 => "fail", 52 => "fail",
	56 => "ok", 62 => "fail", 65 => "ok", 69 => "fail", 0 => "fail");
my %got = map { (line_of($_) => $_->{status}) } check_document($node, 'selfcheck', $self);
is_deeply(\%got, \%expect, 'the check fails where it must, on a document of its own')
  or diag(explain(\%got));

# The documents.
my %count;
my @documents = ('README.md', map { s{^\Q$root/\E}{}r } sort glob("$root/doc/*.md"));
for my $name (grep { $_ ne 'default' && $_ ne 'new database' } sort keys %fixtures_of)
{
	ok(-f "$root/$name", "$name, which has fixtures, is there");
}
for my $name (@documents)
{
	for my $result (check_document($node, $name, slurp_file("$root/$name")))
	{
		$count{ $result->{status} }++;
		if ($result->{status} eq 'other')
		{
			note("$result->{where}: $result->{why}");
			next;
		}
		if ($result->{status} eq 'skip')
		{
		  SKIP: { skip("$result->{where}: $result->{why}", 1); }
			next;
		}
		ok($result->{status} eq 'ok',
			"$result->{where}" . ($result->{why} ne '' ? ": $result->{why}" : ''));
	}
}
my %said = (ok => 'run', fail => 'failed', skip => 'skipped', other => 'not SQL');
note('blocks: ' . join(', ', map { ($count{$_} // 0) . " $said{$_}" } qw(ok fail skip other)));
ok(($count{ok} // 0) >= 15, 'at least 15 examples run');

done_testing();
