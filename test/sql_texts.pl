#!/usr/bin/perl
# The SQL texts of wals, read from its C sources, held to the rules that
# keep them from depending on the caller's search_path (doc/security.md):
#
#   - SPI is called only from src/catalog/spi.c, whose functions pin
#     search_path to pg_catalog, pg_temp for every statement;
#   - every operator is written OPERATOR(pg_catalog.op);
#   - every function, type and relation is qualified: pg_catalog., the
#     extension's schema or a relation named by OID (both reach the text
#     as %s), never a bare name that a schema on the path could shadow.
#
# A text is a run of adjacent C string literals that starts with an SQL
# keyword; %s stands for what C puts there, always quoted and qualified.
# Prints each text that breaks a rule with its file and line, then
# "N passed, N failed" (texts); exits non-zero when any failed.
#
#   test/sql_texts.pl [SRC_DIR]
use strict;
use warnings;
use File::Find;

my $src = shift // 'src';
my @files;
find(sub { push @files, $File::Find::name if /\.c$/ }, $src);
@files = sort @files;

my ($passed, $failed) = (0, 0);
my $spi_calls = qr/\bSPI_(?:execute\w*|exec|execp|prepare\w*|cursor_open\w*|cursor_fetch|cursor_move|scroll_cursor_\w+)\s*\(/;

# SQL words that may stand before "(" without being a function
my %not_a_function = map { $_ => 1 } qw(
	IN ANY ALL VALUES EXISTS ARRAY KEY CONFLICT AS FROM JOIN USING ON
	AND OR NOT WHERE SELECT BY OVER FILTER WITHIN GROUP COALESCE NULLIF GREATEST LEAST
	CAST ROW);

sub fail
{
	my ($file, $line, $why, $text) = @_;
	print "FAIL $file:$line: $why\n    $text\n";
}

for my $file (@files)
{
	open my $fh, '<', $file or die "$file: $!";
	my $code = do { local $/; <$fh> };
	close $fh;

	# comments are not code
	$code =~ s{/\*.*?\*/}{my $c = $&; $c =~ s/[^\n]//g; $c}gse;

	if ($file !~ m{(?:^|/)catalog/spi\.c$})
	{
		while ($code =~ /$spi_calls/g)
		{
			my $line = 1 + (substr($code, 0, pos($code)) =~ tr/\n//);
			fail($file, $line, 'SPI called outside src/catalog/spi.c', $&);
			$failed++;
		}
	}

	# runs of adjacent string literals, with the line each starts on
	while ($code =~ /("(?:[^"\\\n]|\\.)*"(?:\s*(?:INT64_FORMAT|UINT64_FORMAT)?\s*"(?:[^"\\\n]|\\.)*")*)/g)
	{
		my $run = $1;
		my $line = 1 + (substr($code, 0, pos($code) - length($run)) =~ tr/\n//);
		my $text = join '', ($run =~ /"((?:[^"\\\n]|\\.)*)"/g);
		next
		  unless $text =~ /^\s*(?:SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|WITH|DROP|LOCK|FROM|WHERE|AND|JOIN|ORDER|GROUP)\s/
		  || $text =~ /OPERATOR\(|::/;
		check($file, $line, $text);
	}
}

sub check
{
	my ($file, $line, $text) = @_;
	my $t = $text;
	my $ok = 1;

	$t =~ s/\\"/"/g;
	$t =~ s/\\\\/\\/g;
	# literals and quoted identifiers hold no names to resolve
	$t =~ s/'(?:[^']|'')*'/''/g;
	$t =~ s/"[^"]*"/""/g;
	$t =~ s/OPERATOR\(pg_catalog\.[^)\s]+\)/ OP /g;
	# casts: to a qualified type, or one C names
	if ($t =~ /::\s*(?!pg_catalog\.|%s)(\w+)/)
	{
		fail($file, $line, "a cast to the unqualified type \"$1\"", $text);
		$ok = 0;
	}
	$t =~ s/::\s*(?:pg_catalog\.)?(?:""|\w+|%s)(?:\[\])?/ /g;
	$t =~ s/=>/ /g;				# named arguments
	# the assignments of UPDATE's SET
	$t =~ s{\bSET\b(.*?)(?=\bFROM\b|\bWHERE\b|$)}{my $set = $1; $set =~ s/(^|,)\s*\w+\s*=/$1 /g; "SET$set"}ge;
	$t =~ s/\$\d+/ /g;
	$t =~ s/%(?:\.\d+)?[sdgu]|%lld|%ld/ X /g;
	$t =~ s/\(\s*\*\s*\)/()/g;	# count(*)
	$t =~ s/^\s*SELECT\s+\*/SELECT /;
	if ($t =~ m{([=<>!|#@~+*/^&%-]+)})
	{
		fail($file, $line, "the operator \"$1\" is not written OPERATOR(pg_catalog.$1)", $text);
		$ok = 0;
	}
	while ($t =~ /(?<![.\w])(\w+)\s*\(/g)
	{
		next if $not_a_function{uc $1} || $1 eq 'X';
		fail($file, $line, "the function \"$1\" is not qualified", $text);
		$ok = 0;
		last;
	}
	while ($t =~ /\b(?:FROM|JOIN|INTO|(?<!DO )UPDATE|TABLE)\s+(?!X\b|pg_catalog\.|ONLY\b|LATERAL\b|\()(\w+)/gi)
	{
		fail($file, $line, "the relation \"$1\" is not named by C (%s) or pg_catalog", $text);
		$ok = 0;
		last;
	}
	if ($ok) { $passed++ } else { $failed++ }
}

print "$passed passed, $failed failed\n";
exit($failed > 0 ? 1 : 0);
