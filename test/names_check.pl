#!/usr/bin/perl
# Every file the tree names exists, so that no comment or document sends a
# reader to a file that moved or went:
#
# - every link of the documents a reader follows (README.md, DEVELOPERS.md
#   and doc/*.md) leads somewhere: a relative link names a file or folder
#   of the tree, and an anchor (#...) names a heading of its target, as
#   GitHub makes anchors of headings (lower case, punctuation but hyphens
#   and underscores dropped, spaces as hyphens);
# - every path into the tree's own folders (src/, test/, gpu/, doc/,
#   examples/, sql/, debian/) that a source, script or document writes,
#   #include lines aside, names a file or folder there, and every bare
#   name of a source, script or document (engine_cpu.c, Recipes.pm) is the
#   name of one, or of one of the few files of other projects in %outside.
#
# CHANGELOG.md is history, and names files as they were.  Prints each
# broken link or name with its file and line, then "N links, N names,
# N broken"; exits 1 where one is broken.
#
#   test/names_check.pl      (from the repository root; make test runs it)
use strict;
use warnings;

# Files of other projects that comments name, with where they live.
my %outside = map { $_ => 1 } (
	'gen_ratings.py', 'ref_wals.py',    # the project's shared tools, beside the clone
	'Cluster.pm',                       # PostgreSQL::Test::Cluster
	'postgres.h', 'pg_config.h', 'dbcommands.h', 'ri_triggers.c',    # PostgreSQL
	'pg_version_compat.h',              # Citus
	'arm_neon.h',                       # the compiler's
	'mallory.h',                        # not a file: a name t/019 makes a table describe
);

my @docs = ('README.md', 'DEVELOPERS.md', sort glob('doc/*.md'));
my %anchors;

sub anchor
{
	my ($title) = @_;
	$title = lc $title;
	$title =~ s/`//g;
	$title =~ s/[^\w\- ]//g;
	$title =~ s/ /-/g;
	return $title;
}

# The anchors of a markdown file: its headings outside fenced code.
sub anchors_of
{
	my ($file) = @_;
	return $anchors{$file} if $anchors{$file};
	my %seen;
	open(my $fh, '<', $file) or die "$file: $!";
	my $fenced = 0;
	while (my $line = <$fh>)
	{
		$fenced = !$fenced if $line =~ /^```/;
		$seen{ anchor($1) } = 1 if !$fenced && $line =~ /^#{1,6} (.*?)\s*$/;
	}
	close($fh);
	return $anchors{$file} = \%seen;
}

my ($links, $broken) = (0, 0);
for my $doc (@docs)
{
	my $dir = $doc =~ m{^(.*)/} ? "$1/" : '';
	open(my $fh, '<', $doc) or die "$doc: $!";
	my $fenced = 0;
	while (my $line = <$fh>)
	{
		$fenced = !$fenced if $line =~ /^```/;
		next if $fenced;
		while ($line =~ /\]\(([^)\s]+)\)/g)
		{
			my $target = $1;
			next if $target =~ m{^[a-z]+:};
			$links++;
			my ($path, $frag) = $target =~ /^([^#]*)(?:#(.*))?$/;
			my $file = $path eq '' ? $doc : "$dir$path";
			1 while $file =~ s{[^/]+/\.\./}{};
			my $why;
			if (!-e $file)
			{
				$why = 'no such file';
			}
			elsif (defined $frag && $file =~ /\.md$/ && !anchors_of($file)->{$frag})
			{
				$why = "no heading for #$frag in $file";
			}
			next unless $why;
			$broken++;
			print "$doc:$.: $target: $why\n";
		}
	}
	close($fh);
}
# The names of the tree: what git tracks, and what it would track.
my @tree = split /\n/, `git ls-files --cached --others --exclude-standard`;
die "git ls-files failed\n" if $? != 0;
my %path = map { $_ => 1 } @tree;
my %base = map { m{([^/]+)$}; $1 => 1 } @tree;
my $own = qr{^(?:src|test|gpu|doc|examples|sql|debian)/};
my $kinds = qr{c|h|cu|cuh|cc|pl|pm|sh|py|md|sql|control|json|svg};
my $names = 0;
for my $file (@tree)
{
	next if $file =~ m{^CHANGELOG\.md$|^debian/|^test/expected/|\.(?:svg|csv|out)$};
	next unless -f $file && -T $file;
	open(my $fh, '<', $file) or die "$file: $!";
	while (my $line = <$fh>)
	{
		next if $line =~ /^\s*#\s*include/;
		while ($line =~ m{(?<![\w./\$-])((?:[\w.-]+/)*[\w-]+\.($kinds))(?![\w/])}g)
		{
			my ($name, $kind) = ($1, $2);
			my $why;
			if ($name =~ $own)
			{
				$names++;
				next if -e $name || $name =~ m{^test/bench/(?:out|cache)/};
				$why = 'no such file';
			}
			elsif ($name !~ m{/} && $kind =~ /^(?:c|h|cu|cuh|cc|pl|pm|sh|py|md)$/)
			{
				$names++;
				next if $base{$name} || $outside{$name};
				$why = 'no file of that name';
			}
			else
			{
				next;
			}
			$broken++;
			print "$file:$.: $name: $why\n";
		}
	}
	close($fh);
}
print "$links links, $names names, $broken broken\n";
exit($broken ? 1 : 0);
