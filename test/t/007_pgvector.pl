
# The pgvector bridge, where pgvector is installed: the item factors index
# with HNSW as doc/serving.md shows, the exact scan over them agrees with
# wals_recommend, the index answers with high recall, and the recipe that
# retrains and re-creates the index in one transaction leaves it in place.
# wals itself never requires pgvector: without it this test is skipped.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', 'client_min_messages = warning');
$node->start;

if ($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'}) eq '0')
{
	$node->stop;
	plan skip_all => 'pgvector (extension "vector") is not installed';
}

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE EXTENSION vector;
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 3000 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 4000) u, generate_series(1, 30) g;
SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm',
  factors => 16, iterations => 5);
});

my $query = q{(SELECT factors::vector(16) FROM m_user_factors WHERE user_id = %d)};

sub exact_by_vector
{
	my ($user) = @_;
	return $node->safe_psql('postgres',
		sprintf(q{SET enable_indexscan = off;
		  SELECT string_agg(item_id::text, ',' ORDER BY d, item_id) FROM (
		    SELECT item_id, factors::vector(16) <#> %s AS d FROM m_item_factors
		    ORDER BY d, item_id LIMIT 10) s}, sprintf($query, $user)));
}

sub wals_top
{
	my ($user) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT string_agg(item_id::text, ',' ORDER BY ord)
		  FROM wals_recommend($user, 10, 'm', exclude_rated => false) WITH ORDINALITY r(item_id, score, ord)});
}

my $agree = 0;
for my $user (1 .. 20)
{
	$agree++ if exact_by_vector($user * 97) eq wals_top($user * 97);
}
is($agree, 20, 'pgvector\'s exact scan and wals_recommend give the same top 10');

# doc/serving.md's recipe.
$node->safe_psql('postgres',
	q{CREATE INDEX m_item_hnsw ON m_item_factors USING hnsw ((factors::vector(16)) vector_ip_ops)});
like(
	$node->safe_psql('postgres',
		sprintf(q{SET enable_seqscan = off; EXPLAIN (COSTS OFF)
		  SELECT item_id FROM m_item_factors ORDER BY factors::vector(16) <#> %s LIMIT 10},
			sprintf($query, 1))),
	qr/Index Scan using m_item_hnsw/,
	'the HNSW index serves the inner-product query');

sub hnsw_recall
{
	my ($hits, $total) = (0, 0);
	for my $user (1 .. 20)
	{
		my %exact = map { $_ => 1 } split /,/, wals_top($user * 97);
		my @approx = split /\n/, $node->safe_psql('postgres',
			sprintf(q{SET enable_seqscan = off; SET hnsw.ef_search = 40;
			  SELECT item_id FROM m_item_factors ORDER BY factors::vector(16) <#> %s LIMIT 10},
				sprintf($query, $user * 97)));
		$hits += grep { $exact{$_} } @approx;
		$total += 10;
	}
	return $hits / $total;
}
my $recall = hnsw_recall();
note("HNSW recall@10 with ef_search 40: $recall");
cmp_ok($recall, '>=', 0.8, 'the HNSW index finds most of the exact top 10');

# A retraining writes into the same tables: the index stays, and indexes
# the new factors.
$node->safe_psql(
	'postgres', q{
SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm',
  factors => 16, iterations => 5, seed => 7);
});
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_indexes WHERE tablename = 'm_item_factors' AND indexname = 'm_item_hnsw'}),
	'1', 'the index stays through a retraining');
$recall = hnsw_recall();
note("HNSW recall@10 after the retraining: $recall");
cmp_ok($recall, '>=', 0.8, 'the index finds the retrained model\'s top 10');

$node->stop;
done_testing();
