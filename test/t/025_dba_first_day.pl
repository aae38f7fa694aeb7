
# doc/dba.md runs as a DBA would run it on a first day: its SQL blocks,
# read from the document itself, in a database that has no wals yet.  The
# extension goes into a schema of its own; a role's search_path that
# leaves that schema out does not see wals's functions, which it calls
# qualified, and one that names it does; a CSV file and a file of one
# user's items per line load through \copy, each as the document says;
# and a model trains on what they loaded and serves from a role whose
# path is the document's.
use strict;
use warnings FATAL => 'all';

use File::Spec;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $doc = "$FindBin::RealBin/../../doc/dba.md";

# The ```sql blocks of the document, in order.
my @blocks;
{
	open(my $fh, '<', $doc) or die "cannot read $doc: $!";
	my $block;
	while (my $line = <$fh>)
	{
		if (!defined $block && $line =~ /^```sql\s*$/)
		{
			$block = '';
		}
		elsif (defined $block && $line =~ /^```\s*$/)
		{
			push @blocks, $block;
			undef $block;
		}
		elsif (defined $block)
		{
			$block .= $line;
		}
	}
	close $fh;
}
is(scalar @blocks, 3, 'doc/dba.md has its three blocks: the schema, a CSV file, a file of lines');
like($blocks[0], qr/CREATE EXTENSION wals SCHEMA wals/, 'the first puts wals into a schema of its own');
like($blocks[1], qr/\\copy ratings FROM 'ratings\.csv'/, 'the second loads a CSV file');
like($blocks[2], qr/\\copy lines FROM 'train\.txt'/, 'the third loads a file of lines');

my $node = PostgreSQL::Test::Cluster->new('first_day');
$node->init;
$node->append_conf('postgresql.conf', "client_min_messages = warning\n");
$node->start;
$node->safe_psql('postgres', 'CREATE ROLE app LOGIN; CREATE DATABASE shop;');

# 1. the extension in a schema of its own, and the application's path
$node->safe_psql('shop', $blocks[0]);
is($node->safe_psql('shop', q{SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'wals'}),
	'wals', 'wals is in the schema wals');
is($node->safe_psql('shop', q{SELECT count(*) FROM pg_proc WHERE proname = 'wals_train'
	AND pronamespace = 'public'::regnamespace}), '0', 'and nothing of it in public');

# 2. and 3. the files, written where psql's \copy reads them: the
# directory psql runs in
my $dir = PostgreSQL::Test::Utils::tempdir;
open(my $csv, '>', File::Spec->catfile($dir, 'ratings.csv')) or die $!;
print $csv "user_id,item_id,rating\n";
for my $u (1 .. 60)
{
	print $csv join(',', $u, ($u * 7 + $_ * 13) % 40 + 1, 1 + ($u + $_) % 5), "\n" for (1 .. 5);
}
close $csv;
open(my $lines, '>', File::Spec->catfile($dir, 'train.txt')) or die $!;
for my $u (61 .. 100)
{
	# items apart by single spaces, and a trailing one, as such files have
	print $lines join(' ', $u, map { ($u * 3 + $_ * 11) % 40 + 1 } (1 .. 6)), " \n";
}
close $lines;

chdir $dir or die "cannot enter $dir: $!";
$node->safe_psql('shop', $blocks[1]);
is($node->safe_psql('shop', 'SELECT count(*), count(DISTINCT user_id), sum(rating) > 0 FROM ratings'),
	'300|60|t', 'the CSV file loaded, header and all, one rating a line');
$node->safe_psql('shop', $blocks[2]);
is( $node->safe_psql(
		'shop', q{SELECT count(*), count(DISTINCT user_id), count(rating)
	FROM ratings WHERE user_id > 60}),
	'240|40|0',
	'each line gave its user a row for each of its items, without a rating');
is($node->safe_psql('shop', q{SELECT count(*) FROM ratings r
	WHERE r.user_id = 61 AND r.item_id = (61 * 3 + 11) % 40 + 1}), '1',
	'the first item of a line follows its user');
is($node->safe_psql('shop', q{SELECT to_regclass('lines') IS NULL}), 't', 'the table of lines is gone');

# a model of what they loaded, trained with wals's schema on the path
$node->safe_psql(
	'shop', q{
SET search_path = public, wals;
SELECT 1 FROM wals_train('ratings', 'user_id', 'item_id', model => 'public.ratings', factors => 4,
  iterations => 3);
GRANT SELECT ON ratings_user_factors, ratings_item_factors TO app;
});

# a path without the extension's schema does not see wals: qualified, it works
my ($ret, $out, $err) = $node->psql('shop', q{SET search_path = public;
SELECT count(*) FROM wals_recommend(61, 5, 'public.ratings');});
isnt($ret, 0, 'a search_path without the schema wals does not find wals_recommend');
like($err, qr/function wals_recommend\(integer, integer, unknown\) does not exist/, 'and says so');
is($node->safe_psql('shop', q{SET search_path = public;
SELECT count(*) FROM wals.wals_recommend(61, 5, 'public.ratings')}), '5', 'qualified, it serves');

# the application's role, with the path the document gives it
is($node->safe_psql('shop', q{SHOW search_path}, extra_params => [ '-U', 'app' ]),
	'"$user", public, wals', 'the application role has the document\'s search_path');
is( $node->safe_psql(
		'shop', q{SELECT count(*) FROM wals_recommend(61, 5, 'public.ratings')},
		extra_params => [ '-U', 'app' ]),
	'5',
	'and serves from it, unqualified');

chdir $FindBin::RealBin;
$node->stop;
done_testing();
