
# Every point where wals runs a role's code, with a hook planted there that
# calls every function of wals.  The hook is a PL/pgSQL function of an
# ordinary role, mallory, that runs each call in a block of its own and
# logs the SQLSTATE it ended with; it is planted as a row-security policy
# on both factor tables (serving, refresh, warm start), in the source view
# (training, tuning, refresh), in a test source view (wals_evaluate), in a
# held-out cells view (validation_table), as a trigger on the user
# factor table (the rows wals_refresh_users writes), in an index
# expression and a partial index's predicate of the factor tables, which
# the planner folds while it plans wals's statements (planning), and in the
# tables wals_attach_model reads of a model whose catalog row is gone.  Each function of wals
# is then called from outside.  Nothing may crash, no call may end in an
# internal error (XX000) inside or outside, and what the hook calls from
# inside either serves or is refused with 55006.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init;
$node->append_conf('postgresql.conf', "client_min_messages = warning\n");
$node->start;
my $start_time = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA mallory AUTHORIZATION mallory;
});

my $setup = q{
SET ROLE mallory;
CREATE TABLE mallory.r AS
  SELECT u AS user_id, (u * 7 + g * 13) % 40 + 1 AS item_id, (1 + (u + g) % 3)::real AS rating,
    (u * 10 + g)::bigint AS ts
  FROM generate_series(1, 60) u, generate_series(1, 6) g;
CREATE TABLE mallory.hook_log (at text, call text, state text);
-- what the hook calls: every function of wals, on the model m (qualified:
-- wals reads with search_path set to pg_catalog, pg_temp)
CREATE TABLE mallory.hook_calls (call text);
INSERT INTO mallory.hook_calls VALUES
  ($$SELECT count(*) FROM public.wals_recommend(1, 3, 'mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_recommend_batch('{1,2}', 3, 'mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_recommend_items('{1,2}', NULL, 3, 'mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_similar_items(1, 3, 'mallory.m')$$),
  ($$SELECT public.wals_predict(1, 2, 'mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_explain(1, 2, 'mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_rated_items(1, 'mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_evaluate('mallory.m', 'mallory.r', 'user_id', 'item_id', 'rating', 3)$$),
  ($$SELECT public.wals_refresh_users('{1,2}', 'mallory.m')$$),
  ($$SELECT public.wals_refresh_items('{1,2}', 'mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_refresh('mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_train('mallory.r', 'user_id', 'item_id', model => 'mallory.m', factors => 2, iterations => 1, replace => true)$$),
  ($$SELECT count(*) FROM public.wals_retrain('mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_train('mallory.r', 'user_id', 'item_id', model => 'mallory.other', factors => 2, iterations => 1)$$),
  ($$SELECT count(*) FROM public.wals_tune('mallory.r', 'user_id', 'item_id', model => 'mallory.tuned', max_trials => 1)$$),
  ($$SELECT public.wals_drop_model('mallory.m')$$),
  ($$SELECT public.wals_attach_model('mallory.m')$$),
  ($$SELECT count(*) FROM public.wals_devices()$$),
  ($$SELECT count(*) FROM public.wals_shards('mallory.r')$$);
-- the hook: once per outer call (not again from the calls it makes), each
-- call in a block of its own, its SQLSTATE logged
CREATE FUNCTION mallory.hook(at text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE
  c record;
BEGIN
  IF pg_catalog.current_setting('mallory.in_hook', true) = 'on'
     OR pg_catalog.current_setting('mallory.hook_at', true) IS DISTINCT FROM at THEN
    RETURN true;
  END IF;
  PERFORM pg_catalog.set_config('mallory.in_hook', 'on', true);
  FOR c IN SELECT call FROM mallory.hook_calls LOOP
    BEGIN
      EXECUTE c.call;
      INSERT INTO mallory.hook_log VALUES (at, c.call, '00000');
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO mallory.hook_log VALUES (at, c.call, SQLSTATE);
    END;
  END LOOP;
  PERFORM pg_catalog.set_config('mallory.in_hook', 'off', true);
  PERFORM pg_catalog.set_config('mallory.hook_at', 'done', true);
  RETURN true;
END $$;
-- folded by the planner, as the model's owner, whoever plans
CREATE FUNCTION mallory.hook_planned() RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM mallory.hook('planning');
  RETURN 0;
END $$;
CREATE FUNCTION mallory.hook_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM mallory.hook('trigger');
  RETURN NEW;
END $$;
CREATE VIEW mallory.source_view AS
  SELECT * FROM mallory.r WHERE mallory.hook('source');
CREATE VIEW mallory.test_view AS
  SELECT * FROM mallory.r WHERE mallory.hook('test source');
CREATE VIEW mallory.kept AS
  SELECT * FROM mallory.r WHERE user_id % 5 <> 0 OR item_id % 2 = 0;
CREATE VIEW mallory.held_view AS
  SELECT user_id, item_id FROM mallory.r
  WHERE user_id % 5 = 0 AND item_id % 2 = 1 AND mallory.hook('held-out cells');
};
my ($ret, $out, $err) = $node->psql('postgres', $setup);
is($ret, 0, 'mallory plants its hook') or diag($err);

# (Re)train mallory.m from the source view, and arm the policies and the
# trigger on its tables (which a retraining keeps), so that every point is
# armed.
sub fresh_model
{
	my ($ret, $out, $err) = $node->psql(
		'postgres', q{
SET ROLE mallory;
SELECT count(*) FROM wals_train('mallory.source_view', 'user_id', 'item_id', 'rating',
  model => 'mallory.m', factors => 2, iterations => 1, replace => true, changed_col => 'ts');
ALTER TABLE mallory.m_user_factors ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE mallory.m_item_factors ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS p ON mallory.m_user_factors;
DROP POLICY IF EXISTS p ON mallory.m_item_factors;
DROP TRIGGER IF EXISTS t ON mallory.m_user_factors;
DROP INDEX IF EXISTS mallory.m_user_planned, mallory.m_item_planned;
CREATE INDEX m_user_planned ON mallory.m_user_factors ((user_id + mallory.hook_planned()));
CREATE INDEX m_item_planned ON mallory.m_item_factors (item_id) WHERE mallory.hook_planned() = 0;
CREATE POLICY p ON mallory.m_user_factors USING (mallory.hook('user factors'));
CREATE POLICY p ON mallory.m_item_factors USING (mallory.hook('item factors'));
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON mallory.m_user_factors
  FOR EACH ROW EXECUTE FUNCTION mallory.hook_trigger();
});
	die "could not train mallory.m: $err" if $ret != 0;
}

# wals_refresh, after ratings of old and new users and items changed
my $refresh = q{UPDATE mallory.r SET ts = ts + 1000 WHERE user_id IN (1, 2);
INSERT INTO mallory.r VALUES (1, 500, 1, 5000), (999, 3, 1, 5000);
SELECT count(*) FROM wals_refresh('mallory.m', 'touched')};
my @outer = (
	[ 'user factors', q{SELECT count(*) FROM wals_recommend(1, 3, 'mallory.m')} ],
	[ 'item factors', q{SELECT count(*) FROM wals_recommend(1, 3, 'mallory.m')} ],
	[ 'planning', q{SELECT count(*) FROM wals_recommend(1, 3, 'mallory.m')} ],
	[ 'planning', q{SELECT count(*) FROM wals_recommend_batch('{1,2,3}', 3, 'mallory.m')} ],
	[ 'planning', q{SELECT wals_refresh_users('{1,2}', 'mallory.m')} ],
	[ 'planning', q{SELECT count(*) FROM wals_retrain('mallory.m', warm_start => true)} ],
	[ 'user factors', q{SELECT count(*) FROM wals_recommend_batch('{1,2,3}', 3, 'mallory.m')} ],
	[ 'item factors', q{SELECT count(*) FROM wals_recommend_items('{1,2}', NULL, 3, 'mallory.m')} ],
	[ 'item factors', q{SELECT count(*) FROM wals_similar_items(1, 3, 'mallory.m')} ],
	[ 'user factors', q{SELECT wals_predict(1, 2, 'mallory.m')} ],
	[ 'user factors', q{SELECT count(*) FROM wals_explain(1, 2, 'mallory.m')} ],
	[ 'user factors', q{SELECT count(*) FROM wals_rated_items(1, 'mallory.m')} ],
	[ 'test source', q{SELECT count(*) FROM wals_evaluate('mallory.m', 'mallory.test_view', 'user_id', 'item_id', 'rating', 3)} ],
	[ 'source', q{SELECT wals_refresh_users('{1,2}', 'mallory.m')} ],
	[ 'trigger', q{SELECT wals_refresh_users('{1,2}', 'mallory.m')} ],
	[ 'user factors', q{SELECT wals_refresh_users('{1,2}', 'mallory.m')} ],
	[ 'source', q{SELECT count(*) FROM wals_train('mallory.source_view', 'user_id', 'item_id', 'rating', model => 'mallory.m', factors => 2, iterations => 1)} ],
	[ 'user factors', q{SELECT count(*) FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating', model => 'mallory.m', factors => 2, iterations => 1, warm_start => true, replace => true)} ],
	[ 'held-out cells', q{SELECT count(*) FROM wals_train('mallory.kept', 'user_id', 'item_id', 'rating', model => 'mallory.m', factors => 2, iterations => 2, validation_table => 'mallory.held_view', replace => true)} ],
	[ 'source', q{SELECT count(*) FROM wals_retrain('mallory.m')} ],
	[ 'user factors', q{SELECT count(*) FROM wals_retrain('mallory.m', warm_start => true)} ],
	[ 'trigger', q{SELECT count(*) FROM wals_retrain('mallory.m')} ],
	[ 'source', q{SELECT count(*) FROM wals_tune('mallory.source_view', 'user_id', 'item_id', model => 'mallory.t', max_trials => 2)} ],
	[ 'source', q{CALL wals_tune_concurrently('mallory.source_view', 'user_id', 'item_id', model => 'mallory.t', max_trials => 2)} ],
	[ 'source', q{SELECT wals_refresh_items('{1,2,500}', 'mallory.m')} ],
	[ 'user factors', q{SELECT wals_refresh_items('{1,2}', 'mallory.m')} ],
	[ 'item factors', q{SELECT wals_refresh_items('{1,2}', 'mallory.m')} ],
	[ 'planning', q{SELECT wals_refresh_items('{1,2}', 'mallory.m')} ],
	map { [ $_, $refresh ] } ('source', 'trigger', 'user factors', 'item factors', 'planning'),
);

my $bad = qr/XX\d\d\d|server closed the connection|connection to server was lost|terminat/;
for my $case (@outer)
{
	my ($at, $sql) = @$case;
	fresh_model();
	$node->safe_psql('postgres', 'TRUNCATE mallory.hook_log');
	for my $role ('mallory', 'postgres')
	{
		($ret, $out, $err) = $node->psql('postgres',
			"SET ROLE $role; SELECT pg_catalog.set_config('mallory.hook_at', '$at', false); $sql");
		unlike($err, $bad, "as $role, hooked at $at, no crash and no internal error: $sql");
	}
	my $states = $node->safe_psql('postgres',
		q{SELECT string_agg(DISTINCT state, ',' ORDER BY state) FROM mallory.hook_log});
	like($states, qr/^(00000,)?55006$/, "the hook ran at $at, and its calls ended cleanly ($states)");
	my $wrong = $node->safe_psql(
		'postgres', q{
SELECT string_agg(call || ': ' || state, '; ') FROM mallory.hook_log
WHERE (call ~ 'wals_(train|retrain|tune|refresh|drop_model|attach_model)' AND state <> '55006')
   OR (call !~ 'wals_(train|retrain|tune|refresh|drop_model|attach_model)' AND state <> '00000')});
	is($wrong, '', "from the hook at $at, writes are refused (55006) and the rest serves");
}

# wals_attach_model reads the factor tables of a model whose catalog row is
# gone, as their owner: the hook in their policies runs there, before the
# model is in the catalog, so that what it serves of the model finds none
# (42704), and what writes is refused (55006).
fresh_model();
$node->safe_psql('postgres', q{
DELETE FROM wals_training_log WHERE schema = 'mallory' AND model = 'm';
DELETE FROM wals_models WHERE schema = 'mallory' AND model = 'm';
TRUNCATE mallory.hook_log;});
for my $role ('mallory', 'postgres')
{
	($ret, $out, $err) = $node->psql('postgres',
		"SET ROLE $role; SELECT pg_catalog.set_config('mallory.hook_at', 'user factors', false); SELECT wals_attach_model('mallory.m')");
	unlike($err, $bad, "as $role, hooked at user factors, no crash and no internal error: wals_attach_model");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_models WHERE model = 'm'}), '1',
	'the model is attached');
my $wrong = $node->safe_psql(
	'postgres', q{
SELECT string_agg(call || ': ' || state, '; ') FROM mallory.hook_log
WHERE (call ~ 'wals_(train|retrain|tune|refresh|drop_model|attach_model)' AND state <> '55006')
   OR (call ~ 'wals_(recommend|similar|predict|explain|rated|evaluate)' AND state <> '42704')
   OR (call ~ 'wals_(devices|shards)' AND state <> '00000')});
is($wrong, '', 'from the hook in an attach, writes are refused (55006) and the model is not there yet (42704)');
is($node->safe_psql('postgres', q{SELECT count(DISTINCT call) FROM mallory.hook_log}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM mallory.hook_calls}),
	'the hook ran every call');

is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $start_time,
	'the server never restarted');
$node->stop;
done_testing();
