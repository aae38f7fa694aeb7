
# Serving while the model is retrained: one session calls wals_recommend and
# wals_recommend_batch in a loop while another retrains the model and
# commits, three times.  No call fails, every answer is one of the committed
# models' answers, whole, and the reader moves on to each new model without
# reconnecting.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', 'client_min_messages = warning');
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 800 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 6000) u, generate_series(1, 25) g;
CREATE INDEX ON ratings (user_id);
ANALYZE ratings;
-- what the reader saw, written by the reader after its loop
CREATE TABLE seen (n int, recs text, batch text);
-- a row once the trainer has committed its last model
CREATE TABLE trained (done bool);
});

sub train
{
	my ($seed) = @_;
	$node->safe_psql('postgres',
		qq{SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating',
		  model => 'm', factors => 16, iterations => 3, seed => $seed)});
}

# The answers the reader's two calls give, as text, for the model committed now.
my $recs_sql = q{SELECT string_agg(item_id || ':' || score, ',' ORDER BY ord)
  FROM wals_recommend(42, 5, 'm') WITH ORDINALITY r(item_id, score, ord)};
my $batch_sql = q{SELECT string_agg(user_id || '/' || item_id || ':' || score, ',' ORDER BY user_id, rank)
  FROM wals_recommend_batch('{7, 42, 4000}', 3, 'm')};

train(1);
my %models;
sub remember
{
	my $recs = $node->safe_psql('postgres', $recs_sql);
	my $batch = $node->safe_psql('postgres', $batch_sql);
	$models{"$recs|$batch"} = $node->safe_psql('postgres',
		q{SELECT version FROM wals_models WHERE model = 'm'});
}
remember();

# The reader: calls until the trainer is done and once more, each in its
# own transaction as a connection pool runs them, its two calls in one
# statement, which sees one model whatever commits meanwhile (two
# statements of a READ COMMITTED transaction may each see another).
my $reader = $node->background_psql('postgres', on_error_stop => 0, timeout => 180);
$reader->set_query_timer_restart;
$reader->query_until(qr/reading/, qq{\\echo reading
DO \$\$
DECLARE
  t0 timestamptz := clock_timestamp();
  i int := 0;
  r text;
  b text;
  last_call bool := false;
BEGIN
  WHILE NOT last_call AND clock_timestamp() < t0 + interval '120 seconds' LOOP
    last_call := EXISTS (SELECT FROM trained);
    i := i + 1;
    SELECT ($recs_sql), ($batch_sql) INTO r, b;
    INSERT INTO seen VALUES (i, r, b);
    COMMIT;
  END LOOP;
END \$\$;
\\echo done
});

# The trainer: three retrainings, each committed while the reader reads.
for my $seed (2, 3, 4)
{
	sleep 1;
	train($seed);
	remember();
}
$node->safe_psql('postgres', 'INSERT INTO trained VALUES (true)');

my $done = eval {
	pump_until($reader->{run}, $reader->{timeout}, \$reader->{stdout}, qr/done/);
};
ok($done, 'the reader\'s loop ended');
is($reader->{stderr}, '', 'no call of the reader failed') or diag($reader->{stderr});
$reader->quit;

my @seen = split /\n/, $node->safe_psql('postgres',
	q{SELECT recs || '|' || batch FROM seen ORDER BY n});
cmp_ok(scalar @seen, '>', 20, 'the reader made many calls (' . scalar(@seen) . ')');
my @unknown = grep { !exists $models{$_} } @seen;
is(scalar @unknown, 0, 'every answer is that of a committed model, whole')
  or diag("unknown answers: " . join("\n", @unknown[0 .. ($#unknown < 2 ? $#unknown : 2)]));

# The versions the reader went through, in order, without going back.
my @versions = map { $models{$_} // -1 } @seen;
my @distinct = grep { $_ == 0 || $versions[$_] != $versions[$_ - 1] } 0 .. $#versions;
my @path = map { $versions[$_] } @distinct;
is_deeply(\@path, [ sort { $a <=> $b } values %models ],
	'the reader saw each committed model in turn, never an older one again')
  or diag("versions seen in order: @path");

$node->stop;
done_testing();
