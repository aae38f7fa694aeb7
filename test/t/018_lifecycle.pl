
# A model over its life, as a DBA leaves it running: an analyst trains it,
# grants an application role what serving needs, comments its tables and
# adds an index; retrainings (plain, warm-started, tuned) keep all of that,
# the tables themselves, and the application serving.  And readers never
# wait: an application session left idle in a transaction after serving
# holds its locks through a retraining, which neither waits for it nor makes
# the sessions that serve meanwhile wait (no call over 100 ms).
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init;
$node->append_conf('postgresql.conf', "client_min_messages = warning\n");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE ROLE analyst LOGIN;
CREATE ROLE app LOGIN;
CREATE SCHEMA shop AUTHORIZATION analyst;
SET ROLE analyst;
CREATE TABLE shop.plays AS
  SELECT u AS user_id, (u * 7 + g * 13) % 800 + 1 AS item_id, 1 + (u + g) % 5 AS n
  FROM generate_series(1, 4000) u, generate_series(1, 25) g;
SELECT model FROM wals_train('shop.plays', 'user_id', 'item_id', 'n', model => 'shop.m',
  factors => 16, iterations => 3);
GRANT USAGE ON SCHEMA shop TO app;
GRANT SELECT ON shop.m_user_factors, shop.m_item_factors TO app;
COMMENT ON TABLE shop.m_item_factors IS 'the items of the shop, as the model sees them';
CREATE INDEX m_item_first ON shop.m_item_factors ((factors[1]));
});

my $kept = q{
SELECT c.oid::regclass, c.relacl, obj_description(c.oid, 'pg_class'),
       (SELECT string_agg(i.indexrelid::regclass::text, ',' ORDER BY 1)
        FROM pg_index i WHERE i.indrelid = c.oid)
FROM pg_class c WHERE c.relname IN ('m_user_factors', 'm_item_factors') ORDER BY 1};
my $before = $node->safe_psql('postgres', $kept);
like($before, qr/app=r\/analyst.*the items of the shop.*m_item_first/s,
	'the analyst granted, commented and indexed the factor tables');
my $oids = q{SELECT user_factors::oid || ',' || item_factors::oid FROM wals_models WHERE model = 'm'};
my $tables = $node->safe_psql('postgres', $oids);
my $serve = q{SET ROLE app; SELECT count(*) FROM wals_recommend(1, 10, 'shop.m')};

for my $retrain (
	q{SELECT count(*) FROM wals_train('shop.plays', 'user_id', 'item_id', 'n', model => 'shop.m',
	  factors => 16, iterations => 3, seed => 2)},
	q{SELECT count(*) FROM wals_train('shop.plays', 'user_id', 'item_id', 'n', model => 'shop.m',
	  factors => 16, iterations => 2, warm_start => true)},
	q{SELECT count(*) FROM wals_tune('shop.plays', 'user_id', 'item_id', 'n', model => 'shop.m',
	  max_trials => 2, space => '{"factors": [8, 16]}')},
	q{SELECT count(*) FROM wals_retrain('shop.m')},
	q{SELECT count(*) FROM wals_retrain('shop.m', warm_start => true, iterations => 2)})
{
	my ($ret, $out, $err) = $node->psql('postgres', "SET ROLE analyst; $retrain");
	is($ret, 0, "the analyst retrains: $retrain") or diag($err);
	is($node->safe_psql('postgres', $kept), $before,
		'grants, comment and index are kept');
	is($node->safe_psql('postgres', $oids), $tables, 'in the same tables');
	is($node->safe_psql('postgres', $serve), '10', 'and the application serves');
}

# Readers never wait.  The retraining is made long enough to be caught in
# the act: more ratings and iterations.
$node->safe_psql(
	'postgres', q{SET ROLE analyst;
INSERT INTO shop.plays
  SELECT u, (u * 11 + g * 17) % 800 + 1, 1 FROM generate_series(1, 40000) u, generate_series(1, 25) g;});
$node->safe_psql('postgres',
	q{CREATE TABLE public.served (slowest_ms float8, retrained bool); GRANT INSERT ON public.served TO app});
my $idle = $node->background_psql('postgres', on_error_stop => 0);
$idle->set_query_timer_restart;
$idle->query_safe(q{SET ROLE app; BEGIN; SELECT count(*) FROM wals_recommend(1, 10, 'shop.m')});
my $trainer = $node->background_psql('postgres', on_error_stop => 0);
$trainer->set_query_timer_restart;
$trainer->query_safe(q{SET ROLE analyst; SET lock_timeout = '30s'});
my $version = $node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'm'});
$trainer->query_until(qr/sent/, q{\echo sent
SELECT count(*) FROM wals_train('shop.plays', 'user_id', 'item_id', 'n', model => 'shop.m',
  factors => 32, iterations => 8, workers => 0, replace => true);
\echo done
});

# Serve in a loop while it trains, each call a transaction of its own and
# timed in the server, until a while after the new model is there.
$node->safe_psql(
	'postgres', qq{
SET ROLE app;
DO \$\$
DECLARE
  t timestamptz;
  worst interval := '0';
  seen_new int := 0;
BEGIN
  FOR i IN 1 .. 3000 LOOP
    t := pg_catalog.clock_timestamp();
    PERFORM pg_catalog.count(*) FROM public.wals_recommend((i % 100) + 1, 10, 'shop.m');
    worst := GREATEST(worst, pg_catalog.clock_timestamp() - t);
    COMMIT;
    IF (SELECT version FROM public.wals_models WHERE model = 'm') <> $version THEN
      seen_new := seen_new + 1;
    END IF;
    EXIT WHEN seen_new > 20;
    PERFORM pg_catalog.pg_sleep(0.005);
  END LOOP;
  INSERT INTO public.served VALUES (extract(epoch FROM worst) * 1000, seen_new > 0);
END \$\$;});
my ($slowest, $retrained) = split /\|/,
  $node->safe_psql('postgres', q{SELECT round(slowest_ms::numeric, 1), retrained FROM served});
is($retrained, 't', 'the model was retrained while the loop served');
cmp_ok($slowest, '<', 100, "no call waited: the slowest took $slowest ms");
my $ok = eval {
	pump_until($trainer->{run}, $trainer->{timeout}, \$trainer->{stdout}, qr/^done\n/m);
};
ok($ok, 'the retraining ended while a reader sat idle in its transaction');
unlike($trainer->{stderr}, qr/ERROR/, 'without waiting for its lock') or diag($trainer->{stderr});
$idle->query_safe('COMMIT');
$idle->quit;
$trainer->quit;
done_testing();
