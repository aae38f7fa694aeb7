
# Upgrading: a database on 0.1.0 whose catalog holds a model, as well as rows
# that hostile roles wrote into it (which 0.1.0 and 0.2.0 let any role do), is
# updated with ALTER EXTENSION wals UPDATE.  The model serves exactly as a
# model trained by 0.3.0 from the same data does; the hostile rows are gone
# and the tables they named untouched; a tenant's source is read as the
# tenant; the updated extension holds the same objects as a new installation,
# among them the trigger that refuses DROP EXTENSION wals while models exist.
# A view on a function whose signature changes stops the update with an error
# naming it, and nothing is half-done.
#
# The library installed is 0.3.0's, which refuses to train or serve in a
# database still on an older version, so the old model is written the way
# 0.1.0 wrote one: two factor tables and a catalog row, with the factors of
# a model trained by 0.3.0 in another database.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use UpgradeTest;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', 'client_min_messages = warning');
$node->start;

my $ratings_sql = q{
CREATE TABLE ratings AS
  SELECT u AS user_id, (u * 7 + g * 13) % 300 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 1000) u, generate_series(1, 15) g;
CREATE INDEX ON ratings (user_id);
};

# The reference: the same model trained by 0.3.0.
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', "CREATE EXTENSION wals; $ratings_sql");
$node->safe_psql('fresh',
	q{SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm',
	  factors => 8, iterations => 4)});

my $inserts =
  $node->safe_psql('fresh', v010_model_sql('public', 'm', 'public.ratings', 'rating'));

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION wals VERSION '0.1.0';
$ratings_sql
CREATE TABLE m_user_factors (user_id bigint NOT NULL, factors real[] NOT NULL);
CREATE TABLE m_item_factors (item_id bigint NOT NULL, factors real[] NOT NULL);
$inserts
ALTER TABLE m_user_factors ADD PRIMARY KEY (user_id);
ALTER TABLE m_item_factors ADD PRIMARY KEY (item_id);
INSERT INTO wals_training_log VALUES ('m', (SELECT version FROM wals_models), 1, 1.0, 0.1);
});
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
	'0.1.0', 'version 0.1.0 installed, with a model');

# What hostile roles could write into the 0.1.0 catalog: a row naming a
# superuser's tables (attack: a superuser drops or retrains it), and a model
# of a tenant whose source is a view that records who reads it.
$node->safe_psql(
	'postgres', q{
CREATE TABLE precious (id int);
INSERT INTO precious VALUES (1), (2);
CREATE TABLE precious_user_factors (user_id bigint, factors real[]);
CREATE ROLE mallory LOGIN;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT SELECT ON ratings, m_user_factors, m_item_factors TO mallory;
SET ROLE mallory;
INSERT INTO wals_models SELECT 'evil', 'public.precious', 'user_id', 'item_id', NULL, feedback,
  factors, iterations, max_iterations, regularization, alpha, unobserved_weight, solver,
  cg_steps, seed, tolerance, warm_start, users, items, ratings, loss, device, workers, load_s,
  train_s, store_s, total_s, trained_at, 'mallory', version, 'public', 'precious_user_factors',
  'precious' FROM wals_models WHERE name = 'm';
CREATE TABLE mallory.seen (who name);
GRANT INSERT ON mallory.seen TO PUBLIC;
CREATE FUNCTION mallory.spy() RETURNS bool LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO mallory.seen VALUES (current_user); RETURN true; END$$;
CREATE TABLE mallory.r AS SELECT user_id AS u, item_id AS i FROM ratings WHERE user_id <= 20;
CREATE VIEW mallory.v AS SELECT * FROM mallory.r WHERE mallory.spy();
CREATE TABLE mallory.mm_user_factors AS SELECT * FROM m_user_factors WHERE user_id <= 20;
CREATE TABLE mallory.mm_item_factors AS SELECT * FROM m_item_factors;
INSERT INTO wals_models SELECT 'mm', 'mallory.v', 'u', 'i', NULL, feedback,
  factors, iterations, max_iterations, regularization, alpha, unobserved_weight, solver,
  cg_steps, seed, tolerance, warm_start, users, items, ratings, loss, device, workers, load_s,
  train_s, store_s, total_s, trained_at, 'mallory', version + 1, 'mallory', 'mm_user_factors',
  'mm_item_factors' FROM wals_models WHERE name = 'm';
RESET ROLE;
DELETE FROM mallory.seen;
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM wals_models'), '3',
	'the 0.1.0 catalog holds three rows, two of them written by an ordinary role');

# A view on wals_recommend stops the update, which leaves 0.1.0 whole.
$node->safe_psql('postgres',
	q{CREATE VIEW picks AS SELECT * FROM wals_recommend(1, 5, 'm')});
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'ALTER EXTENSION wals UPDATE');
like($stderr, qr/cannot drop function wals_recommend.*\n.*view picks depends on function wals_recommend/,
	'a view on wals_recommend stops the update, naming the view');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
	'0.1.0', 'the failed update left 0.1.0');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wals_models'), '3',
	'and its catalog as it was');
$node->safe_psql('postgres', 'DROP VIEW picks');

($ret, $stdout, $stderr) = $node->psql('postgres', 'ALTER EXTENSION wals UPDATE');
is($ret, 0, 'ALTER EXTENSION wals UPDATE succeeds');
# The version the control file installs, and the chain of update scripts
# that reaches it from 0.1.0: every release's step, the last one included.
my $default = $node->safe_psql('postgres',
	q{SELECT default_version FROM pg_available_extensions WHERE name = 'wals'});
is($default, '0.7.0', 'the control file installs 0.7.0');
is($node->safe_psql('postgres',
		qq{SELECT path FROM pg_extension_update_paths('wals') WHERE source = '0.1.0' AND target = '$default'}),
	'0.1.0--0.2.0--0.3.0--0.4.0--0.5.0--0.6.0--0.7.0', 'the update from 0.1.0 runs every step, 0.6.0 to 0.7.0 last');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
	$default, 'updated to the default version');
like($stderr, qr/WARNING:  model "evil" was removed from the catalog: /,
	'the row naming tables of another role is removed, with a warning');
is($node->safe_psql('postgres', 'SELECT count(*) FROM precious')
	  . $node->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname = 'precious_user_factors'}),
	'21', 'the tables that row named are untouched');
is($node->safe_psql('postgres', 'SELECT schema, model FROM wals_models ORDER BY 1, 2'),
	"mallory|mm\npublic|m", 'the models move into the schemas of their factor tables');
is($node->safe_psql('postgres', 'SELECT DISTINCT who FROM mallory.seen'), 'mallory',
	"the tenant's source was read as the tenant, not as the superuser running the update");

# The model serves as the same model trained by 0.3.0 does.
my $serve_sql = q{
SELECT u, r.ord, r.item_id, r.score
FROM generate_series(1, 20) u, LATERAL wals_recommend(u, 5, 'm') WITH ORDINALITY r(item_id, score, ord)
ORDER BY u, r.ord;
SELECT wals_predict(3, 100, 'm');
SELECT count(*) FROM wals_recommend_batch('{1,2,3}', 5, 'm');
SELECT md5(string_agg(user_id || ':' || rated::text, ',' ORDER BY user_id)) FROM m_user_factors;
SELECT md5(string_agg(u || ':' || r.item_id || ':' || r.rating, ',' ORDER BY u, r.item_id))
FROM generate_series(1, 1000) u, wals_rated_items(u, 'm') r;
SELECT metric, round(value::numeric, 6) FROM wals_evaluate('m', 'ratings', 'user_id', 'item_id')
WHERE metric IN ('users', 'items_in_training');
};
is($node->safe_psql('postgres', $serve_sql), $node->safe_psql('fresh', $serve_sql),
	'the updated model serves, rated items left out, exactly as one trained by 0.3.0');
is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_training_log WHERE schema = 'public' AND model = 'm'}),
	'1', 'its training log is kept');

# The same objects as a new installation, function by function.
my $objects_sql = q{
SELECT pg_describe_object(d.classid, d.objid, 0) ||
       coalesce(' ' || pg_get_function_arguments(p.oid) || ' -> ' || pg_get_function_result(p.oid) ||
                ' ' || p.provolatile::text || p.proparallel::text || p.prosecdef::text ||
                p.proisstrict::text, '')
FROM pg_depend d LEFT JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
WHERE d.refclassid = 'pg_extension'::regclass
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'wals') AND d.deptype = 'e'
ORDER BY 1};
my $catalog_sql = q{
SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute
WHERE attrelid IN ('wals_models'::regclass, 'wals_training_log'::regclass) AND attnum > 0
  AND NOT attisdropped ORDER BY attrelid::regclass::text, attname;
SELECT relname, relacl, relrowsecurity FROM pg_class
WHERE relname IN ('wals_models', 'wals_training_log', 'wals_model_version_seq') ORDER BY 1;
SELECT pg_get_indexdef(indexrelid) FROM pg_index
WHERE indrelid IN ('wals_models'::regclass, 'wals_training_log'::regclass) ORDER BY 1;
SELECT count(*) FROM pg_policy WHERE polrelid IN ('wals_models'::regclass, 'wals_training_log'::regclass);
};
$node->safe_psql('postgres', 'CREATE DATABASE new_install');
$node->safe_psql('new_install', 'CREATE EXTENSION wals');
is($node->safe_psql('postgres', $objects_sql), $node->safe_psql('new_install', $objects_sql),
	'the updated extension has the objects of a new installation');
is($node->safe_psql('postgres', $catalog_sql), $node->safe_psql('new_install', $catalog_sql),
	'and the same catalog tables, privileges and indexes');

# The last step alone: a database on 0.4.0 updated to the default version
# holds the same objects too.
$node->safe_psql('postgres', 'CREATE DATABASE from_040');
$node->safe_psql('from_040', q{CREATE EXTENSION wals VERSION '0.4.0'});
$node->safe_psql('from_040', 'ALTER EXTENSION wals UPDATE');
is($node->safe_psql('from_040', q{SELECT extversion FROM pg_extension WHERE extname = 'wals'}),
	$default, 'a database on 0.4.0 is updated to the default version');
is($node->safe_psql('from_040', $objects_sql) . $node->safe_psql('from_040', $catalog_sql),
	$node->safe_psql('new_install', $objects_sql) . $node->safe_psql('new_install', $catalog_sql),
	'with the objects and catalog of a new installation');

# Training goes on after the update, and the tenant keeps its model.
$node->safe_psql('postgres',
	q{SELECT model FROM wals_train('ratings', 'user_id', 'item_id', 'rating', model => 'm',
	  factors => 8, iterations => 4, seed => 5)});
cmp_ok($node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'm'}),
	'>', $node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'mm'}),
	'a retraining after the update draws a new version');
# A model of an older version has no changed column: wals_refresh says
# how to give it one, and then takes in what changed.
($ret, $stdout, $stderr) = $node->psql('postgres', q{SELECT * FROM wals_refresh('mallory.mm')});
like($stderr, qr/model "mallory.mm" has no changed column to refresh from/,
	'a model from before the update is refused a refresh, with how to give it a changed column');
$node->safe_psql('postgres', q{
CREATE TABLE stamped AS SELECT user_id, item_id, rating, 1 AS ts FROM ratings;
SELECT model FROM wals_train('stamped', 'user_id', 'item_id', 'rating', factors => 4,
  iterations => 2, changed_col => 'ts');
INSERT INTO stamped VALUES (1, 424242, 5, 2);});
is($node->safe_psql('postgres', q{SELECT ratings || ' ' || new_items || ' ' || mark FROM wals_refresh('stamped')}),
	'1 1 2', 'after the update, a model trained with changed_col refreshes');
$node->safe_psql('postgres', q{SELECT wals_drop_model('stamped'); DROP TABLE stamped});
($ret, $stdout, $stderr) = $node->psql('postgres',
	q{SET ROLE mallory; SELECT wals_drop_model('public.m')});
like($stderr, qr/must be owner of model "public.m"/, 'the tenant cannot drop the other model');
is($node->safe_psql('postgres',
		q{SET ROLE mallory; SELECT count(*) FROM wals_recommend(1, 5, 'mallory.mm')}),
	'5', 'the tenant serves its own model');

# The update installs the trigger that guards DROP EXTENSION wals.
($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP EXTENSION wals');
like($stderr, qr/ERROR:  cannot drop extension wals because 2 models depend on it/,
	'after the update, DROP EXTENSION wals is refused while models exist');
($ret, $stdout, $stderr) = $node->psql('postgres',
	'SET client_min_messages = notice; DROP EXTENSION wals CASCADE');
like($stderr, qr/drop cascades to model "mallory.mm".*drop cascades to model "public.m"/s,
	'and DROP EXTENSION wals CASCADE drops the models');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname ~ '^mm?_(user|item)_factors$'}),
	'0', 'with their factor tables');

# 0.4.0 and 0.5.0 recorded a model's validation table by name; the update
# to 0.6.0 makes each a regclass, resolved without the updater's
# search_path.  The models are trained by this version in another
# database, their schemas dumped into a database on 0.5.0, and their
# catalog rows written there as 0.5.0 kept them, each with a name of its
# validation table: qualified ('data.held'), alone in the model's schema
# ('held', while the superuser updating has a public.held on its path),
# alone beside the model's source ('beside'), alone where only a relation
# of another role has it ('planted'), and nowhere ('gone').  The last two
# become NULL, with a WARNING each (ALTER EXTENSION shows no NOTICE of its
# scripts), and the model is refused a retraining until it is given a
# table again.
my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', q{
CREATE ROLE tenant LOGIN;
CREATE ROLE intruder LOGIN;
CREATE DATABASE v060;
CREATE DATABASE from_050;
});
$node->safe_psql(
	'v060', q{
CREATE EXTENSION wals;
CREATE SCHEMA tenant AUTHORIZATION tenant;
CREATE SCHEMA data AUTHORIZATION tenant;
SET ROLE tenant;
CREATE TABLE tenant.r AS
  SELECT u AS user_id, (u * 7 + g * 13) % 40 + 1 AS item_id
  FROM generate_series(1, 80) u, generate_series(1, 6) g;
CREATE TABLE tenant.held AS
  SELECT u AS user_id, (u * 3 + 1) % 40 + 1 AS item_id FROM generate_series(1, 80) u;
CREATE TABLE data.r AS SELECT * FROM tenant.r;
CREATE TABLE data.beside AS SELECT * FROM tenant.held;
CREATE TABLE data.held AS
  SELECT u AS user_id, (u * 11 + 5) % 40 + 1 AS item_id FROM generate_series(1, 80) u;
SELECT count(*) FROM wals_train('tenant.r', 'user_id', 'item_id', model => 'tenant.q',
  factors => 4, iterations => 4, workers => 0, validation_table => 'data.held', patience => 9);
SELECT count(*) FROM wals_train('tenant.r', 'user_id', 'item_id', model => 'tenant.u',
  factors => 4, iterations => 4, workers => 0, validation_table => 'tenant.held', patience => 9);
SELECT count(*) FROM wals_train('data.r', 'user_id', 'item_id', model => 'tenant.s',
  factors => 4, iterations => 4, workers => 0, validation_table => 'data.beside', patience => 9);
SELECT count(*) FROM wals_train('tenant.r', 'user_id', 'item_id', model => 'tenant.p',
  factors => 4, iterations => 4, workers => 0, validation_table => 'tenant.held', patience => 9);
SELECT count(*) FROM wals_train('tenant.r', 'user_id', 'item_id', model => 'tenant.g',
  factors => 4, iterations => 4, workers => 0, validation_table => 'tenant.held', patience => 9);
});
my $rows_050 = $node->safe_psql(
	'v060', q{
SELECT string_agg(format('INSERT INTO wals_models SELECT (jsonb_populate_record(NULL::wals_models, %L)).*;',
  to_jsonb(m) - 'validation_owner' || jsonb_build_object('validation_table',
    CASE model WHEN 'q' THEN 'data.held' WHEN 'u' THEN 'held' WHEN 's' THEN 'beside'
               WHEN 'p' THEN 'planted' ELSE 'gone' END)), E'\n' ORDER BY model)
FROM wals_models m WHERE schema = 'tenant'});
$node->command_ok([ 'pg_dump', '-n', 'tenant', '-n', 'data', '-f', "$tmp/tenant.sql", '-d', 'v060' ],
	'pg_dump of the schemas of models trained with validation tables');
$node->safe_psql('from_050', q{CREATE EXTENSION wals VERSION '0.5.0'});
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'from_050', '-f', "$tmp/tenant.sql" ],
	'restored into a database on 0.5.0');
$node->safe_psql(
	'from_050', qq{
CREATE TABLE public.held AS
  SELECT u AS user_id, (u * 17 + 2) % 40 + 1 AS item_id FROM generate_series(1, 80) u;
GRANT CREATE ON SCHEMA tenant TO intruder;
SET ROLE intruder;
CREATE TABLE tenant.planted AS
  SELECT u AS user_id, (u * 17 + 2) % 40 + 1 AS item_id FROM generate_series(1, 80) u;
RESET ROLE;
$rows_050
SELECT setval('wals_model_version_seq', (SELECT max(version) FROM wals_models));
});
is($node->safe_psql('from_050',
		q{SELECT string_agg(model || ':' || validation_table, ' ' ORDER BY model) FROM wals_models}),
	'g:gone p:planted q:data.held s:beside u:held', 'the 0.5.0 catalog holds the names');

($ret, $stdout, $stderr) = $node->psql('from_050', 'ALTER EXTENSION wals UPDATE');
is($ret, 0, 'the database on 0.5.0 is updated') or diag($stderr);
my $resolved_sql = q{
SELECT m.model, coalesce(n.nspname || '.' || c.relname, 'NULL'), coalesce(m.validation_owner::text, 'NULL')
FROM wals_models m
LEFT JOIN pg_class c ON c.oid = m.validation_table
LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
ORDER BY m.model};
is($node->safe_psql('from_050', $resolved_sql),
	"g|NULL|NULL\np|NULL|NULL\nq|data.held|tenant\ns|data.beside|tenant\nu|tenant.held|tenant",
	'a qualified name resolves exactly, a name alone in the model\'s schema, else beside its source, '
	  . 'never on the updater\'s path nor to another role\'s relation');
is($node->safe_psql('from_050',
		q{SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		  WHERE attrelid = 'wals_models'::regclass AND attname IN ('validation_table', 'validation_owner')
		  ORDER BY attname}),
	"regrole\nregclass", 'validation_table is a regclass, validation_owner a regrole');
for my $m ([ 'g', 'gone' ], [ 'p', 'planted' ])
{
	my ($model, $name) = @$m;
	like($stderr,
		qr/WARNING:  the validation table "$name" of model "tenant.$model" could not be resolved, and is no longer recorded\n.*\nHINT:  Give it again with SELECT wals_retrain\('tenant.$model', validation_table => \.\.\.\)/,
		"a WARNING names model tenant.$model, whose \"$name\" resolves to nothing, and says how to give it again");
}
unlike($stderr, qr/model "tenant.[qsu]"/, 'the names resolved go without a WARNING');

# The model updated retrains, as the superuser with public.held on its
# path, on tenant.held: the validation score of the training in v060.
my $score_sql = q{SELECT round(validation_score::numeric, 6) FROM wals_models WHERE model = 'u'};
$node->safe_psql('from_050', q{SELECT count(*) FROM wals_retrain('tenant.u', workers => 0)});
is($node->safe_psql('from_050', $score_sql), $node->safe_psql('v060', $score_sql),
	'the model retrains on the relation its name resolved to');
($ret, $stdout, $stderr) = $node->psql('from_050', q{SELECT count(*) FROM wals_retrain('tenant.g')});
like($stderr, qr/ERROR:  the validation table of model "tenant.g" is not known/,
	'one whose name resolved to nothing is refused');
$node->safe_psql('from_050',
	q{SET ROLE tenant; SELECT count(*) FROM wals_retrain('tenant.g', validation_table => 'tenant.held')});
is($node->safe_psql('from_050',
		q{SELECT validation_table = 'tenant.held'::regclass FROM wals_models WHERE model = 'g'}),
	't', 'until its owner gives the table again');

# A library installed before ALTER EXTENSION wals UPDATE: the functions
# whose arguments changed are called through the older declarations, and
# refuse before they read an argument that is not there (a read past them
# crashed the server).
$node->safe_psql('postgres', 'CREATE DATABASE from_060');
$node->safe_psql(
	'from_060', q{
CREATE EXTENSION wals VERSION '0.6.0';
CREATE TABLE r AS SELECT u AS user_id, (u * 7) % 30 + 1 AS item_id, 1.0::real AS rating
  FROM generate_series(1, 60) u;
});
for my $call (
	q{SELECT count(*) FROM wals_train('r', 'user_id', 'item_id', 'rating', factors => 4)},
	q{SELECT count(*) FROM wals_tune('r', 'user_id', 'item_id', 'rating', max_trials => 1,
	  metric => 'ndcg@5', space => '{"factors": [4]}')})
{
	($ret, $stdout, $stderr) = $node->psql('from_060', $call);
	like($stderr,
		qr/ERROR:  extension "wals" is at version 0.6.0 in this database, but its library is version/,
		"before the update, refused with what to do: $call");
}
is($node->safe_psql('from_060', 'SELECT 1'), '1', 'and the server is still up');
$node->safe_psql('from_060', 'ALTER EXTENSION wals UPDATE');
is($node->safe_psql('from_060',
		q{SELECT count(*) FROM wals_train('r', 'user_id', 'item_id', 'rating', factors => 4)}),
	'1', 'after it, the training runs');

$node->stop;
done_testing();
