
# No SQL text of wals depends on the caller's search_path.  A hostile role,
# mallory, fills a schema with shadows of what pg_catalog holds: an
# operator of the same name and argument types for every operator, a
# function for every function and aggregate, a domain that refuses every
# value for every base type, each raising an error that names it when it
# runs.  The caller, alice, has that schema ahead of pg_catalog on her
# search_path, and calls every SQL function of wals with the arguments
# that reach its SQL texts (every solver, warm start, validations,
# fold-in, tuning, retraining, refresh, evaluation, attaching, dropping,
# and last DROP EXTENSION wals, which runs wals_uninstall): each must work
# as it does without the shadows, and none may reach a shadow.  A
# validation table named on mallory's path stays the one it named: a
# superuser's retraining, with another table of that name on its own path,
# validates on mallory's, and refuses once hers is dropped and another
# role's made under its name.  A function
# of the extension that this test does not call fails it, so that the next
# one is added here.  The peer functions of sharded training are called
# by a coordinator and checked in t/014_hostile_shards.pl.
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
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA shadow AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA shadow TO PUBLIC;
});

# The shadows, made by mallory; one that PostgreSQL refuses to make (a type
# a PL/pgSQL function cannot take) is skipped.  Domains come last, so that
# the types of the functions and operators are pg_catalog's.
my $shadows = $node->safe_psql(
	'postgres', q{
SET ROLE mallory;
CREATE FUNCTION shadow.fail(what text) RETURNS void LANGUAGE plpgsql
  AS $$BEGIN RAISE EXCEPTION 'shadow reached: %', what; END$$;
DO $do$
DECLARE
  r record;
  n int := 0;
  made int := 0;
  body text;
BEGIN
  -- operators
  FOR r IN
    SELECT o.oprname, o.oprleft::regtype AS l, o.oprright::regtype AS rt,
           o.oprresult::regtype AS res
    FROM pg_catalog.pg_operator o
    WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprcode <> 0
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_type t
                      WHERE t.oid IN (o.oprleft, o.oprright, o.oprresult) AND t.typtype = 'p')
  LOOP
    n := n + 1;
    body := format($f$BEGIN PERFORM shadow.fail(%L); RETURN NULL; END$f$,
                   'operator ' || r.oprname);
    BEGIN
      IF r.l = 0 THEN
        EXECUTE format('CREATE FUNCTION shadow.op_%s(%s) RETURNS %s LANGUAGE plpgsql AS %L',
                       n, r.rt, r.res, body);
        EXECUTE format('CREATE OPERATOR shadow.%s (RIGHTARG = %s, FUNCTION = shadow.op_%s)',
                       r.oprname, r.rt, n);
      ELSE
        EXECUTE format('CREATE FUNCTION shadow.op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L',
                       n, r.l, r.rt, r.res, body);
        EXECUTE format('CREATE OPERATOR shadow.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = shadow.op_%s)',
                       r.oprname, r.l, r.rt, n);
      END IF;
      made := made + 1;
    EXCEPTION WHEN OTHERS THEN
      NULL;
    END;
  END LOOP;
  -- functions, and aggregates over a state of their result type
  FOR r IN
    SELECT p.proname, p.prokind, p.proretset,
           pg_catalog.pg_get_function_identity_arguments(p.oid) AS args,
           p.prorettype::regtype AS res
    FROM pg_catalog.pg_proc p
    WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind IN ('f', 'a')
      AND p.provariadic = 0
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_type t
                      WHERE (t.oid = ANY (p.proargtypes) OR t.oid = p.prorettype)
                        AND t.typtype = 'p')
  LOOP
    n := n + 1;
    body := format($f$BEGIN PERFORM shadow.fail(%L); RETURN NULL; END$f$,
                   'function ' || r.proname);
    BEGIN
      IF r.prokind = 'a' THEN
        EXECUTE format('CREATE FUNCTION shadow.sfunc_%s(%s%s) RETURNS %s LANGUAGE plpgsql AS %L',
                       n, r.res, CASE WHEN r.args = '' THEN '' ELSE ', ' || r.args END,
                       r.res, body);
        EXECUTE format('CREATE AGGREGATE shadow.%I(%s) (SFUNC = shadow.sfunc_%s, STYPE = %s)',
                       r.proname, CASE WHEN r.args = '' THEN '*' ELSE r.args END, n, r.res);
      ELSE
        EXECUTE format('CREATE FUNCTION shadow.%I(%s) RETURNS %s%s LANGUAGE plpgsql AS %L',
                       r.proname, r.args, CASE WHEN r.proretset THEN 'SETOF ' ELSE '' END,
                       r.res, body);
      END IF;
      made := made + 1;
    EXCEPTION WHEN OTHERS THEN
      NULL;
    END;
  END LOOP;
  -- types
  FOR r IN
    SELECT t.typname FROM pg_catalog.pg_type t
    WHERE t.typnamespace = 'pg_catalog'::regnamespace AND t.typtype = 'b'
      AND t.typelem = 0
  LOOP
    BEGIN
      EXECUTE format('CREATE DOMAIN shadow.%I AS pg_catalog.%I CHECK (shadow.fail(%L) IS NULL)',
                     r.typname, r.typname, 'type ' || r.typname);
      made := made + 1;
    EXCEPTION WHEN OTHERS THEN
      NULL;
    END;
  END LOOP;
  RAISE NOTICE '%', made;
END
$do$;
SELECT (SELECT count(*) FROM pg_operator WHERE oprnamespace = 'shadow'::regnamespace) || ' '
    || (SELECT count(*) FROM pg_proc WHERE pronamespace = 'shadow'::regnamespace) || ' '
    || (SELECT count(*) FROM pg_type WHERE typnamespace = 'shadow'::regnamespace AND typtype = 'd');
});
my ($nops, $nfuncs, $ntypes) = split / /, $shadows;
note("shadows: $nops operators, $nfuncs functions, $ntypes types");
cmp_ok($nops, '>', 500, 'mallory shadows the operators of pg_catalog');
cmp_ok($nfuncs, '>', 2000, 'and its functions and aggregates');
cmp_ok($ntypes, '>', 50, 'and its base types');

# The shadows work: a query of alice's own that leaves a name bare meets one.
my $path = 'SET search_path = alice, shadow, pg_catalog, public;';
my ($ret, $out, $err) = $node->psql('postgres',
	"SET ROLE alice; $path SELECT 1 WHERE 1 = 1;");
like($err, qr/shadow reached: operator =/, 'a bare operator in a query reaches the shadow');
($ret, $out, $err) = $node->psql('postgres',
	"SET ROLE alice; $path SELECT pg_catalog.jsonb_array_elements('[1]') #>> '{}';");
like($err, qr/shadow reached: operator #>>/,
	'so does the operator with an argument of unknown type that wals_tune used');
($ret, $out, $err) = $node->psql('postgres', "SET ROLE alice; $path SELECT '1'::int8;");
like($err, qr/shadow reached: type int8/, 'and a bare type name');

$node->safe_psql(
	'postgres', q{
SET ROLE alice;
CREATE TABLE alice.r AS
  SELECT u AS user_id, (u * 7 + g * 13) % 40 + 1 AS item_id, (1 + (u + g) % 5)::real AS rating,
    u * 8 + g AS ts
  FROM generate_series(1, 80) u, generate_series(1, 8) g;
CREATE TABLE alice.t AS
  SELECT u AS user_id, (u * 11 + g * 5) % 40 + 1 AS item_id, 1::real AS rating
  FROM generate_series(1, 80) u, generate_series(1, 2) g;
CREATE TABLE alice.held AS SELECT user_id, item_id FROM alice.t;
SELECT pg_catalog.count(*) FROM wals_train('alice.r', 'user_id', 'item_id', 'rating',
  model => 'alice.a', factors => 4, iterations => 2);
RESET ROLE;
-- its catalog row gone, as a dump of schema alice alone leaves it
DELETE FROM wals_models WHERE schema = 'alice' AND model = 'a';
});

my $m = "model => 'alice.m', factors => 4, iterations => 2";
my @calls = (
	[ wals_devices => q{SELECT pg_catalog.count(*) FROM wals_devices()} ],
	[ wals_progress_rows => q{SELECT pg_catalog.count(*) FROM wals_progress} ],
	[ wals_shards => q{SELECT pg_catalog.count(*) FROM wals_shards('alice.r')} ],
	[ wals_train => qq{SELECT pg_catalog.count(*) FROM wals_train('alice.r', 'user_id', 'item_id', 'rating', $m)} ],
	[ wals_train => qq{SELECT pg_catalog.count(*) FROM wals_train('alice.r', 'user_id', 'item_id', 'rating', $m,
		feedback => 'explicit', solver => 'cholesky', regularization_exponent => 0.5, replace => true)} ],
	[ wals_train => qq{SELECT pg_catalog.count(*) FROM wals_train('alice.r', 'user_id', 'item_id', 'rating', $m,
		solver => 'subspace', block_size => 2, accelerate => 'ncg', workers => 2, replace => true)} ],
	[ wals_train => qq{SELECT pg_catalog.count(*) FROM wals_train('alice.r', 'user_id', 'item_id', 'rating', $m,
		warm_start => true, validation => 0.2, patience => 1, validation_metric => 'recall\@5')} ],
	[ wals_train => qq{SELECT pg_catalog.count(*) FROM wals_train('alice.r', 'user_id', 'item_id', 'rating', $m,
		validation_table => 'alice.held')} ],
	[ wals_train => q{SELECT pg_catalog.count(*) FROM wals_train('alice.r', 'user_id', 'item_id', NULL,
		factors => 4, iterations => 2)} ],
	[ wals_recommend => q{SELECT pg_catalog.count(*) FROM wals_recommend(1, 5, 'alice.m')} ],
	[ wals_recommend => q{SELECT pg_catalog.count(*) FROM wals_recommend(2, 5, 'alice.m', false, ARRAY[1, 2, 3]::bigint[], ARRAY[4]::bigint[])} ],
	[ wals_recommend_batch => q{SELECT pg_catalog.count(*) FROM wals_recommend_batch(ARRAY[1, 2, 999]::bigint[], 3, 'alice.m')} ],
	[ wals_recommend_items => q{SELECT pg_catalog.count(*) FROM wals_recommend_items(ARRAY[1, 2, 3]::bigint[], ARRAY[1, 2, 3]::real[], 3, 'alice.m')} ],
	[ wals_similar_items => q{SELECT pg_catalog.count(*) FROM wals_similar_items(1, 3, 'alice.m')} ],
	[ wals_predict => q{SELECT wals_predict(1, 2, 'alice.m') IS NOT NULL} ],
	[ wals_explain => q{SELECT pg_catalog.count(*) FROM wals_explain(1, 2, 'alice.m', 3)} ],
	[ wals_rated_items => q{SELECT pg_catalog.count(*) FROM wals_rated_items(1, 'alice.m')} ],
	[ wals_refresh_users => q{SELECT wals_refresh_users(ARRAY[1, 2, 5000]::bigint[], 'alice.m') IS NOT NULL} ],
	[ wals_train => qq{SELECT pg_catalog.count(*) FROM wals_train('alice.r', 'user_id', 'item_id', 'rating', $m,
		changed_col => 'ts')} ],
	[ wals_refresh => q{INSERT INTO alice.r VALUES (1, 99, 5, 10000), (999, 3, 1, 10001), (999, 98, 2, 10002);
		SELECT pg_catalog.count(*) FROM wals_refresh('alice.m')} ],
	[ wals_refresh => q{INSERT INTO alice.r VALUES (2, 3, 4, 10003);
		SELECT pg_catalog.count(*) FROM wals_refresh('alice.m', 'touched')} ],
	[ wals_refresh_items => q{SELECT wals_refresh_items(ARRAY[1, 2, 99]::bigint[], 'alice.m') IS NOT NULL} ],
	[ wals_evaluate => q{SELECT pg_catalog.count(*) FROM wals_evaluate('alice.m', 'alice.t', 'user_id', 'item_id', 'rating', 5)} ],
	[ wals_retrain => q{SELECT pg_catalog.count(*) FROM wals_retrain('alice.m')} ],
	[ wals_retrain => q{SELECT pg_catalog.count(*) FROM wals_retrain('alice.m', warm_start => true, factors => 4,
		solver => 'subspace', block_size => 2, validation => 0)} ],
	[ wals_tune => q{SELECT pg_catalog.count(*) FROM wals_tune('alice.r', 'user_id', 'item_id', 'rating', model => 'tuned',
		budget => '20 seconds', max_trials => 2, space => '{"factors": [2, 4], "regularization": {"min": 0.05, "max": 1}}')} ],
	[ wals_tune_concurrently => q{CALL wals_tune_concurrently('alice.r', 'user_id', 'item_id', 'rating',
		model => 'tuned_c', budget => '20 seconds', max_trials => 2,
		space => '{"factors": [2, 4], "regularization": {"min": 0.05, "max": 1}}')} ],
	[ wals_attach_model => q{SELECT wals_attach_model('alice.a') IS NOT NULL} ],
	[ wals_recommend => q{SELECT pg_catalog.count(*) FROM wals_recommend(1, 5, 'alice.a')} ],
	[ wals_drop_model => q{SELECT wals_drop_model('alice.a') IS NOT NULL} ],
	[ wals_drop_model => q{SELECT wals_drop_model('tuned') IS NOT NULL} ],
	[ wals_drop_model => q{SELECT wals_drop_model('tuned_c') IS NOT NULL} ],
	[ wals_drop_model => q{SELECT wals_drop_model('alice.m') IS NOT NULL} ],
);

my %called;
for my $call (@calls)
{
	my ($fn, $sql) = @$call;
	($ret, $out, $err) = $node->psql('postgres', "SET ROLE alice; $path $sql", on_error_stop => 1);
	is($ret, 0, "$fn works with shadows ahead of pg_catalog: $sql") or diag($err);
	unlike($err, qr/shadow reached/, "$fn reaches no shadow");
	$called{$fn} = 1;
}

# a model named without a schema is still looked up along alice's own path
($ret, $out, $err) = $node->psql('postgres',
	"SET ROLE alice; $path SELECT pg_catalog.count(*) FROM wals_recommend(1, 5)");
is($ret, 0, 'the one model on the caller\'s path is found by its path') or diag($err);
is($out, '5', 'and serves');
ok($node->safe_psql('postgres', q{SELECT pg_catalog.count(*) FROM wals_models WHERE model = 'r'}) eq '1',
	'a model named after its source went to the first schema of the path');

# A validation table given by name is resolved on the trainer's path and
# kept by OID: mallory trains with validation_table => 'vt', which her path
# finds as mallory.vt; the superuser, whose path finds public.vt under that
# name, retrains her model, which must validate on mallory.vt still.  The
# two tables hold other cells, so that the validation score says which one
# was read (a model of mallory's validated on public.vt shows the other
# score); the tables hold no code, so nothing of mallory's runs as the
# superuser, and the retraining reads them as mallory, the model's owner.
$node->safe_psql(
	'postgres', q{
CREATE SCHEMA mallory AUTHORIZATION mallory;
CREATE TABLE public.vt AS
  SELECT u AS user_id, (u * 13 + 7) % 40 + 1 AS item_id FROM generate_series(1, 80) u;
GRANT SELECT ON public.vt TO mallory, alice;
SET ROLE mallory;
SET search_path = mallory, public;
CREATE TABLE mallory.r AS
  SELECT u AS user_id, (u * 7 + g * 13) % 40 + 1 AS item_id
  FROM generate_series(1, 80) u, generate_series(1, 8) g;
CREATE TABLE mallory.vt AS
  SELECT u AS user_id, (u * 3 + 1) % 40 + 1 AS item_id FROM generate_series(1, 80) u;
SELECT pg_catalog.count(*) FROM wals_train('r', 'user_id', 'item_id', model => 'mallory.v',
  factors => 4, iterations => 6, workers => 0, validation_table => 'vt', patience => 10);
SELECT pg_catalog.count(*) FROM wals_train('r', 'user_id', 'item_id', model => 'mallory.p',
  factors => 4, iterations => 6, workers => 0, validation_table => 'public.vt', patience => 10);
});
my $score_sql = q{SELECT pg_catalog.round(validation_score::pg_catalog.numeric, 6)
  FROM wals_models WHERE schema = 'mallory' AND model = };
my $on_own = $node->safe_psql('postgres', "$score_sql 'v'");
my $on_public = $node->safe_psql('postgres', "$score_sql 'p'");
isnt($on_own, $on_public, "mallory.vt and public.vt give mallory's model other validation scores");
is($node->safe_psql('postgres',
		q{SELECT validation_table = 'mallory.vt'::regclass, validation_owner = 'mallory'::regrole
		  FROM wals_models WHERE schema = 'mallory' AND model = 'v'}),
	't|t', 'the catalog records the relation the trainer named, mallory.vt, and its owner');

($ret, $out, $err) = $node->psql('postgres',
	q{SET search_path = public; SELECT pg_catalog.count(*) FROM wals_retrain('mallory.v', workers => 0)},
	on_error_stop => 1);
is($ret, 0, 'the superuser retrains mallory\'s model with public.vt on its path') or diag($err);
is($node->safe_psql('postgres', "$score_sql 'v'"), $on_own,
	'and it validated on mallory.vt, not on the public.vt its path finds under that name');
is($node->safe_psql('postgres',
		q{SELECT validation_table = 'mallory.vt'::regclass FROM wals_models
		  WHERE schema = 'mallory' AND model = 'v'}),
	't', 'which it still records');

# mallory.vt dropped, and a relation of another role made under its name
# (alice's view, which records who reads it): the model's validation table
# no longer exists, and no retraining, by the superuser or by mallory,
# takes the new relation for it.
$node->safe_psql(
	'postgres', q{
SET ROLE mallory;
DROP TABLE mallory.vt;
RESET ROLE;
CREATE TABLE alice.seen (who name);
ALTER TABLE alice.seen OWNER TO alice;
GRANT INSERT ON alice.seen TO PUBLIC;
SET ROLE alice;
CREATE FUNCTION alice.spy() RETURNS bool LANGUAGE sql
  AS $$INSERT INTO alice.seen VALUES (current_user) RETURNING true$$;
RESET ROLE;
CREATE VIEW mallory.vt AS SELECT user_id, item_id FROM public.vt WHERE alice.spy();
ALTER VIEW mallory.vt OWNER TO alice;
GRANT SELECT ON mallory.vt TO PUBLIC;
SET ROLE alice;
GRANT USAGE ON SCHEMA alice TO mallory;
});
for my $who ('', 'SET ROLE mallory;')
{
	($ret, $out, $err) = $node->psql('postgres',
		"$who SET search_path = mallory, public; SELECT pg_catalog.count(*) FROM wals_retrain('mallory.v', workers => 0)");
	like($err, qr/ERROR:  the validation table of model "mallory.v" no longer exists/,
		($who ? 'as mallory' : 'as the superuser') . ', a retraining is refused once mallory.vt is another relation');
}
is($node->safe_psql('postgres', q{SELECT pg_catalog.count(*) FROM alice.seen}), '0',
	'the relation now named mallory.vt was never read');
$node->safe_psql('postgres',
	q{SET ROLE mallory; SELECT wals_drop_model('mallory.v'), wals_drop_model('mallory.p')});

my @functions = split /\n/, $node->safe_psql(
	'postgres', q{
SELECT DISTINCT p.proname FROM pg_depend d
  JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON d.refobjid = e.oid
WHERE e.extname = 'wals' AND p.proname NOT LIKE 'wals\_shard\_%' ORDER BY 1});

# The last: dropping wals, by the superuser with the shadows ahead of
# pg_catalog on its path, is refused while alice's model holds its tables,
# and with CASCADE drops them.
($ret, $out, $err) = $node->psql('postgres', "$path DROP EXTENSION wals");
like($err, qr/ERROR:  cannot drop extension wals because 1 model depends on it/,
	'wals_uninstall refuses DROP EXTENSION wals with shadows ahead of pg_catalog');
unlike($err, qr/shadow reached/, 'wals_uninstall reaches no shadow');
($ret, $out, $err) = $node->psql('postgres', "$path DROP EXTENSION wals CASCADE");
is($ret, 0, 'DROP EXTENSION wals CASCADE with shadows ahead of pg_catalog') or diag($err);
unlike($err, qr/shadow reached/, 'and wals_uninstall reaches no shadow');
is($node->safe_psql('postgres', q{SELECT pg_catalog.count(*) FROM pg_class WHERE relname LIKE 'r\_%\_factors'}),
	'0', 'the model\'s tables are gone');
$called{wals_uninstall} = 1;

for my $fn (@functions)
{
	ok($called{$fn}, "$fn is called here");
}

done_testing();
