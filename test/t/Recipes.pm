
# The recipes of examples/ as the documents show them: each file is run with
# psql exactly as written, but for the values of its \set lines, with which
# a file names what a DBA replaces (hosts, ports, passwords); and the check
# that the documents show every file as it is.  017_recipes.pl runs the
# postgres_fdw and pg_cron recipes, 013_citus.pl the Citus one.
package Recipes;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use File::Find;
use FindBin;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(run_recipe readme_shows_recipes ask_password ratings_csv trained_as_recipe);

my $root = "$FindBin::RealBin/../..";

# The text of examples/$file with its placeholders given the values of
# %$values: each \set line of the file is one, and each must be given, no
# other, so that a test replaces only what the file says to replace.
sub recipe_text
{
	my ($file, $values) = @_;
	my $text = slurp_file("$root/examples/$file");
	my %left = %$values;
	$text =~ s{^\\set (\w+) .*$}{
		die "examples/$file: no value given for its placeholder $1\n"
		  unless defined $values->{$1};
		delete $left{$1};
		"\\set $1 '$values->{$1}'";
	}gme;
	die "examples/$file names no placeholder " . join(', ', sort keys %left) . "\n" if %left;
	return $text;
}

# Run examples/$file on $node, in database app, with psql as a DBA would
# (psql -f), unaligned and without headers, stopping at the first error;
# as the role $opts{user} with password $opts{password} where given, the
# superuser of the test otherwise; $opts{values} fills the file's
# placeholders and $opts{stdin} is psql's standard input.  Returns psql's
# exit status, standard output and standard error.
sub run_recipe
{
	my ($node, $file, %opts) = @_;
	my $copy = "$PostgreSQL::Test::Utils::tmp_check/recipe_" . ($file =~ s{/}{_}gr);
	open(my $fh, '>', $copy) or die "could not write $copy: $!";
	print $fh recipe_text($file, $opts{values} // {});
	close($fh);

	my $connstr = $node->connstr('app');
	$connstr .= " user=$opts{user}" if defined $opts{user};
	my $stdin = $opts{stdin} // '';
	my ($stdout, $stderr) = ('', '');
	local $ENV{PGPASSWORD} = $opts{password} if defined $opts{password};
	IPC::Run::run([ $node->installed_command('psql'), '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
			'-d', $connstr, '-f', $copy ],
		'<', \$stdin, '>', \$stdout, '2>', \$stderr);
	my $ret = $? >> 8;
	chomp $stdout;
	return ($ret, $stdout, $stderr);
}

# Make $node ask $role for its password (SCRAM) on its socket, in database
# app, as a shard's pg_hba.conf asks the remote role of the coordinator's
# connections: postgres_fdw lets a role other than a superuser connect
# only with a password the server asked for.
sub ask_password
{
	my ($node, $role) = @_;
	my $hba = $node->data_dir . '/pg_hba.conf';
	my $rules = slurp_file($hba);
	open(my $fh, '>', $hba) or die "could not write $hba: $!";
	print $fh "local app $role scram-sha-256\n$rules";
	close($fh);
	$node->reload;
}

# Ratings as the recipes load them, CSV lines user_id,item_id,rating: $users
# users with $per_user ratings each of 500 items, the odd users' ids from
# 1000000 up (shard 2's range in examples/postgres_fdw), the even ones' below
# (shard 1's), among them user 42, whom train.sql serves.
sub ratings_csv
{
	my ($users, $per_user) = @_;
	my $csv = '';
	for my $u (1 .. $users)
	{
		my $id = $u % 2 ? 1000000 + $u : $u;
		for my $g (1 .. $per_user)
		{
			$csv .= sprintf("%d,%d,%d\n", $id, ($u * 7 + $g * 13) % 500 + 1, 1 + ($u + $g) % 5);
		}
	}
	return $csv;
}

# What train.sql, run as analyst on $node's database app, printed in
# $stdout, and left there: the model trained on the $where from every one
# of $rows ratings, ten items served to user 42, the model trained by
# analyst and owned by it.
sub trained_as_recipe
{
	my ($node, $stdout, $rows, $where) = @_;
	like($stdout, qr/^ratings\|2000\|500\|$rows\|15\|shards$/m,
		"the model is trained on the $where, from every row");
	my @served = $stdout =~ /^(\d+)\|[-0-9.e]+$/mg;
	is(scalar @served, 10, 'and serves ten items to user 42');
	is( $node->safe_psql(
			'app', q{SELECT trained_by, pg_get_userbyid(c.relowner) FROM wals_models m
			  JOIN pg_class c ON c.oid = m.user_factors WHERE (schema, model) = ('shop', 'ratings')}),
		'analyst|analyst', 'analyst trained the model and owns it');
	return;
}

# README.md and doc/*.md show every file of examples/ as it is, in one of
# them: a link to the file, a colon, an empty line and a fenced block
# holding its text; and every link of theirs into examples/ names a file
# there.
sub readme_shows_recipes
{
	my $docs = join("\n", map { slurp_file($_) } "$root/README.md", sort glob("$root/doc/*.md"));
	my @files;
	find(sub { push @files, $File::Find::name =~ s{^\Q$root/examples/\E}{}r if -f }, "$root/examples");
	for my $file (sort @files)
	{
		my ($shown) = $docs =~ m{\]\((?:\.\./)?examples/\Q$file\E\):\n\n```\w*\n(.*?)^```$}ms;
		is($shown, slurp_file("$root/examples/$file"), "the documents show examples/$file as it is");
	}
	my @links = $docs =~ m{\]\((?:\.\./)?examples/([^)]+)\)}g;
	is_deeply([ grep { !-f "$root/examples/$_" } @links ], [],
		'every link of the documents into examples/ names a file');
}

1;
