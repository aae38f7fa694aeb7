
# A Citus distributed table, where Citus is installed (Debian does not ship
# it, so this test says it is skipped there).  A distributed table's rows
# live in its shards, and the table itself is an empty shell Citus's
# planner reads through: wals_train must read it through a SELECT, never
# by scanning the shell, and train the model a local copy of the same rows
# trains.  Training in place on Citus's workers is not built yet: the
# coordinator reads the rows.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('citus');
$node->init;
$node->start;
my $available = $node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_available_extensions WHERE name = 'citus'});
if ($available ne '1')
{
	$node->stop;
	plan skip_all => 'Citus is not installed (Debian does not ship it)';
}
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'citus'\n");
$node->restart;

my $port = $node->port;
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION citus;
CREATE EXTENSION wals;
SELECT citus_set_coordinator_host('localhost', $port);
CREATE TABLE ratings (user_id int NOT NULL, item_id int NOT NULL, rating real NOT NULL);
SELECT create_distributed_table('ratings', 'user_id');
INSERT INTO ratings
  SELECT u, (u * 7 + g * 13) % 300 + 1, 1 + (u + g) % 5
  FROM generate_series(1, 1500) u, generate_series(1, 12) g;
CREATE TABLE ratings_here AS SELECT * FROM ratings;
});

for my $source ('ratings', 'ratings_here')
{
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres', qq{SELECT users, items, ratings FROM wals_train('$source', 'user_id', 'item_id',
		  'rating', model => 'm_$source', factors => 8, iterations => 3, workers => 0)});
	is($ret, 0, "$source trains") or diag($stderr);
	is($stdout, '1500|300|18000', "$source: every rating read");
}
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM wals_training_log a JOIN wals_training_log b USING (iteration)
WHERE a.model = 'm_ratings' AND b.model = 'm_ratings_here' AND abs(a.loss - b.loss) <= 1e-6 * b.loss}),
	'3', 'the distributed table trains the model of its rows');

done_testing();
