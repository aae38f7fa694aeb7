
# A database shared by roles that do not trust each other: a superuser, an
# ordinary role alice and a hostile ordinary role mallory, each with a schema
# of its own, and a superuser table nobody else may touch.  Every way an
# ordinary role could reach another's tables, privileges or server through
# wals is tried, and must end with nothing happening: no table of another
# role dropped, no code of one role run with another's privileges, no crash,
# no internal error, names free.  Then a fuzz of the catalog (as a superuser
# could corrupt it) and of a model's own factor tables (as their owner may
# edit them) against every function that reads a model: every call ends in
# a result or an error with a user-facing SQLSTATE, and the server and every
# other session live on.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', 'client_min_messages = warning');
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION wals;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
CREATE TABLE secret (id int PRIMARY KEY, note text);
INSERT INTO secret VALUES (1, 'the superuser''s'), (2, 'own data');
CREATE TABLE secret_user_factors (user_id bigint, factors real[]);
-- what any role's code writes when it runs, and as whom
CREATE TABLE public.seen (who name, what text);
GRANT INSERT ON public.seen TO PUBLIC;
CREATE TABLE public.test_ratings AS
  SELECT u AS user_id, (u * 5 + 3) % 40 + 1 AS item_id, 1.0::real AS rating
  FROM generate_series(1, 60) u;
GRANT SELECT ON public.test_ratings TO PUBLIC;
});
my $start_time = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

# A session that lives through everything below, serving from its cache.
my $bystander = $node->background_psql('postgres', on_error_stop => 0, timeout => 180);
$bystander->set_query_timer_restart;
my $bystander_pid = $bystander->query_safe('SELECT pg_backend_pid()');

sub as_role
{
	my ($role, $sql) = @_;
	return $node->psql('postgres', "SET ROLE $role;\n\\set VERBOSITY verbose\n$sql",
		on_error_stop => 0);
}

# A call that worked: psql ends well after an error unless told to stop, so
# the error output is read too.
sub works
{
	my ($ret, $err, $name) = @_;
	return ok($ret == 0 && $err !~ /ERROR/, $name);
}

sub secret_intact
{
	return $node->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM secret) || ' ' || (SELECT count(*) FROM pg_class
		  WHERE relname = 'secret_user_factors')}) eq '2 1';
}

# Ratings of each role, and a model each.
for my $role ('alice', 'mallory')
{
	my ($ret, $out, $err) = as_role(
		$role, qq{
CREATE TABLE $role.r AS
  SELECT u AS user_id, (u * 7 + g * 13) % 40 + 1 AS item_id, 1 + (u + g) % 3 AS rating
  FROM generate_series(1, 60) u, generate_series(1, 6) g;
SELECT model FROM wals_train('$role.r', 'user_id', 'item_id', 'rating', model => 'shared',
  factors => 4, iterations => 2);
GRANT USAGE ON SCHEMA $role TO PUBLIC;
GRANT SELECT ON $role.shared_user_factors, $role.shared_item_factors TO PUBLIC;});
	works($ret, $err, "$role trains a model named shared in its own schema") or diag($err);
}

# ---------------------------------------------------------------------------
# 1, 2. The catalog is written by wals alone.
for my $sql (
	q{INSERT INTO wals_models SELECT * FROM wals_models},
	q{UPDATE wals_models SET user_factors = 'secret'::regclass WHERE schema = 'mallory'},
	q{UPDATE wals_models SET source = 'secret'::regclass WHERE schema = 'mallory'},
	q{DELETE FROM wals_models WHERE schema = 'alice'},
	q{INSERT INTO wals_training_log SELECT * FROM wals_training_log},
	q{DELETE FROM wals_training_log},
	q{SELECT setval('wals_model_version_seq', 1)},
	q{SELECT nextval('wals_model_version_seq')},
	q{ALTER TABLE wals_models DISABLE ROW LEVEL SECURITY},
	q{CREATE POLICY p ON wals_models USING (true)},
	q{TRUNCATE wals_training_log})
{
	my ($ret, $out, $err) = as_role('mallory', $sql);
	like($err, qr/ERROR:  42501: (permission denied|must be owner)/,
		"mallory cannot write the catalog: $sql");
}
is($node->safe_psql('postgres', q{SELECT string_agg(schema || '.' || model, ',' ORDER BY 1)
  FROM wals_models}), 'alice.shared,mallory.shared', 'the catalog is as wals wrote it');

# mallory reshapes her own model's tables so that their names point
# elsewhere; a superuser then drops and retrains her model.
as_role(
	'mallory', q{
ALTER TABLE mallory.shared_user_factors RENAME TO moved_away;
CREATE TABLE mallory.shared_user_factors (user_id bigint, factors real[]);});
my ($ret, $out, $err) = $node->psql('postgres',
	q{SET client_min_messages = notice; SELECT wals_drop_model('mallory.shared')});
works($ret, $err, 'a superuser drops the reshaped model') or diag($err);
like($err, qr/moved_away was left in place: it is no longer the table wals created/,
	'the renamed table is left in place, and the drop says so');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_class c JOIN pg_namespace n
  ON n.oid = c.relnamespace WHERE nspname = 'mallory' AND relname IN ('moved_away', 'shared_user_factors')}),
	'2', 'neither the renamed table nor the decoy is dropped');
ok(secret_intact(), "the superuser's tables are intact");
as_role('mallory', q{DROP TABLE mallory.moved_away, mallory.shared_user_factors;
SELECT model FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating', model => 'shared',
  factors => 4, iterations => 2);
GRANT SELECT ON mallory.shared_user_factors, mallory.shared_item_factors TO PUBLIC;});

# ---------------------------------------------------------------------------
# 3, 4. No role's code runs with another's privileges.  mallory's model is
# trained from a view whose function records who runs it, and its user
# factor table carries a trigger that does the same, through a function
# with a setting of its own, which the executor keeps from row to row: a
# retraining writing her table row by row once crashed the server on its
# second row.
($ret, $out, $err) = as_role(
	'mallory', q{
CREATE FUNCTION mallory.spy() RETURNS bool LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.seen VALUES (current_user, 'view'); RETURN true; END$$;
CREATE VIEW mallory.v AS SELECT * FROM mallory.r WHERE mallory.spy();
SELECT model FROM wals_train('mallory.v', 'user_id', 'item_id', 'rating', model => 'spied',
  factors => 4, iterations => 2);
CREATE FUNCTION mallory.trig() RETURNS trigger LANGUAGE plpgsql SET search_path = mallory AS
  $$BEGIN INSERT INTO public.seen VALUES (current_user, 'trigger'); RETURN NEW; END$$;
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON mallory.spied_user_factors
  FOR EACH ROW EXECUTE FUNCTION mallory.trig();
GRANT SELECT ON mallory.spied_user_factors, mallory.spied_item_factors TO PUBLIC;});
works($ret, $err, 'mallory trains from a view that calls her function') or diag($err);
$node->safe_psql('postgres', 'DELETE FROM public.seen');

my $serve_all = q{
SELECT count(*) FROM wals_recommend(1, 5, 'mallory.spied');
SELECT count(*) FROM wals_recommend_batch('{1,2,3,4}', 5, 'mallory.spied');
SELECT count(*) FROM wals_recommend_items('{1,2,3}', NULL, 5, 'mallory.spied');
SELECT count(*) FROM wals_similar_items(1, 5, 'mallory.spied');
SELECT count(*) FROM wals_explain(1, 2, 'mallory.spied');
SELECT count(*) FROM wals_rated_items(1, 'mallory.spied');
SELECT wals_predict(1, 2, 'mallory.spied');
SELECT count(*) FROM wals_evaluate('mallory.spied', 'public.test_ratings', 'user_id', 'item_id');
};
for my $role ('postgres', 'alice')
{
	($ret, $out, $err) = as_role($role, $serve_all);
	works($ret, $err, "$role serves mallory's model with every function") or diag($err);
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.seen}), '0',
	"serving never ran mallory's view");

($ret, $out, $err) = $node->psql('postgres', q{SELECT wals_refresh_users('{1,2,3}', 'mallory.spied')});
works($ret, $err, "a superuser refreshes mallory's model") or diag($err);
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT who || ':' || what, ',') FROM public.seen}),
	'mallory:trigger,mallory:view',
	"the refresh ran mallory's view and trigger as mallory, never as the superuser");
($ret, $out, $err) = as_role('alice', q{SELECT wals_refresh_users('{1}', 'mallory.spied')});
like($err, qr/ERROR:  42501: must be owner of model "mallory.spied"/,
	'alice cannot refresh a model she does not own');
$node->safe_psql('postgres', 'DELETE FROM public.seen');

# wals_retrain reads the source the model records, which mallory chose: as
# mallory, her view's function with it.
($ret, $out, $err) = $node->psql('postgres', q{SELECT model FROM wals_retrain('mallory.spied')});
works($ret, $err, "a superuser retrains mallory's model with wals_retrain") or diag($err);
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT who || ':' || what, ',' ORDER BY who || ':' || what) FROM public.seen}),
	'mallory:trigger,mallory:view',
	"wals_retrain ran mallory's view and trigger as mallory, and nothing of hers as the superuser");
is($node->safe_psql('postgres', q{SELECT pg_get_userbyid(owner) FROM wals_models WHERE model = 'spied'}),
	'mallory', 'the model retrained is still mallory\'s');
$node->safe_psql('postgres', 'DELETE FROM public.seen');

# A superuser retraining mallory's model leaves it hers, and writes its
# tables in place as mallory: her trigger on them runs, as her, never as the
# superuser; her view, which the retraining does not name, does not.
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT model FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating', model => 'mallory.spied',
	  factors => 4, iterations => 2, warm_start => true, replace => true)});
works($ret, $err, "a superuser retrains mallory's model") or diag($err);
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT tableowner, ',') FROM pg_tables
  WHERE schemaname = 'mallory' AND tablename LIKE 'spied%'}), 'mallory',
	'the retrained tables belong to mallory');
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT who || ':' || what, ',') FROM public.seen}),
	'mallory:trigger',
	"the retraining ran mallory's trigger as mallory, and nothing of hers as the superuser");

# alice cannot retrain, drop or take over mallory's model.
for my $sql (
	q{SELECT wals_drop_model('mallory.shared')},
	q{SELECT * FROM wals_train('alice.r', 'user_id', 'item_id', model => 'mallory.shared')},
	q{SELECT * FROM wals_train('alice.r', 'user_id', 'item_id', model => 'mallory.shared', replace => true)},
	q{SELECT * FROM wals_retrain('mallory.shared')})
{
	($ret, $out, $err) = as_role('alice', $sql);
	like($err, qr/ERROR:  42501: must be owner of model "mallory.shared"/,
		"alice cannot touch mallory's model: $sql");
}

# ---------------------------------------------------------------------------
# 13. A model's tables are read and written as its owner, in a
# security-restricted operation, planning included.  The planner evaluates
# an IMMUTABLE function of constant arguments as the role that plans:
# mallory hangs one on her factor tables wherever the planner folds it (an
# index expression, a partial index's predicate, an extended statistics
# expression, the CHECK constraint of an inheritance child), and through a
# volatile function it notes in public.seen whom it ran as.  Whoever serves,
# refreshes or retrains her model, it runs as mallory, never as them.
($ret, $out, $err) = as_role(
	'mallory', q{
CREATE FUNCTION mallory.note(what text) RETURNS bool LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.seen VALUES (current_user, what); RETURN true; END$$;
CREATE FUNCTION mallory.zero(what text) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS
  $$BEGIN PERFORM mallory.note(what); RETURN 0; END$$;
SELECT model FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating', model => 'planned',
  factors => 4, iterations => 2);
GRANT SELECT ON mallory.planned_user_factors, mallory.planned_item_factors TO PUBLIC;
CREATE INDEX ON mallory.planned_user_factors ((user_id + mallory.zero('index expression')));
CREATE INDEX ON mallory.planned_item_factors (item_id) WHERE mallory.zero('partial index') = 0;
CREATE STATISTICS mallory.planned_stats ON (item_id + mallory.zero('statistics'))
  FROM mallory.planned_item_factors;
CREATE TABLE mallory.planned_kid (CHECK (user_id > mallory.zero('check')))
  INHERITS (mallory.planned_user_factors);
ANALYZE mallory.planned_item_factors;});
works($ret, $err, 'mallory hangs an IMMUTABLE function on her factor tables') or diag($err);
$node->safe_psql('postgres', 'DELETE FROM public.seen');
my $planned_all = q{
SELECT count(*) FROM wals_recommend(1, 5, 'mallory.planned');
SELECT count(*) FROM wals_recommend_batch('{1,2,3,4}', 5, 'mallory.planned');
SELECT count(*) FROM wals_recommend_items('{1,2,3}', NULL, 5, 'mallory.planned');
SELECT count(*) FROM wals_similar_items(1, 5, 'mallory.planned');
SELECT count(*) FROM wals_explain(1, 2, 'mallory.planned');
SELECT count(*) FROM wals_rated_items(1, 'mallory.planned');
SELECT wals_predict(1, 2, 'mallory.planned');
SELECT count(*) FROM wals_evaluate('mallory.planned', 'public.test_ratings', 'user_id', 'item_id');
};
for my $sql (
	$planned_all,
	q{SELECT wals_refresh_users('{1,2,3}', 'mallory.planned')},
	q{SELECT wals_refresh_items('{1,2,3}', 'mallory.planned')},
	q{SELECT model FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating', model => 'mallory.planned',
	  factors => 4, iterations => 2, warm_start => true)},
	q{SELECT model FROM wals_retrain('mallory.planned', warm_start => true)},
	$planned_all)
{
	# a new session each time: a backend folds an index's expressions once
	($ret, $out, $err) = $node->psql('postgres', $sql);
	works($ret, $err, "the superuser: $sql") or diag($err);
}
($ret, $out, $err) = as_role('alice', $planned_all);
works($ret, $err, "alice serves mallory's model with every function") or diag($err);
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM public.seen WHERE who <> 'mallory'}), '0',
	'no function mallory hung on her factor tables ran as anyone but mallory');
is($node->safe_psql('postgres',
	q{SELECT string_agg(DISTINCT what, ',' ORDER BY what) FROM public.seen WHERE who = 'mallory'}),
	'check,index expression,partial index,statistics',
	'each of them ran, as mallory');
$node->safe_psql('postgres', 'DELETE FROM public.seen');

# 13. The owner's work is never done as a member of the owner role.  team
# owns team.m; alice and mallory are members, and mallory forces a
# row-security policy that notes whom it runs as on its item factors.
# alice's refresh, warm start and retraining run it as team; alice serving
# team.m is refused, since the policy that applies to her is not the one
# wals reads with; a superuser is served what team sees.
$node->safe_psql(
	'postgres', q{
CREATE ROLE team NOLOGIN;
GRANT team TO alice, mallory;
CREATE SCHEMA team AUTHORIZATION team;
SET ROLE team;
CREATE TABLE team.r AS
  SELECT u AS user_id, (u * 7 + g * 13) % 40 + 1 AS item_id, 1 + (u + g) % 3 AS rating, 1 AS ts
  FROM generate_series(1, 60) u, generate_series(1, 6) g;
SELECT model FROM wals_train('team.r', 'user_id', 'item_id', 'rating', model => 'team.m',
  factors => 4, iterations => 2, changed_col => 'ts');});
($ret, $out, $err) = as_role(
	'mallory', q{
ALTER TABLE team.m_item_factors ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY p ON team.m_item_factors USING (mallory.note('team policy'));});
works($ret, $err, 'mallory, a member of team, forces a policy on team\'s item factors')
  or diag($err);
for my $sql (
	q{SELECT wals_refresh_users('{1,2,3}', 'team.m')},
	q{SELECT wals_refresh_items('{1,2,3}', 'team.m')},
	q{INSERT INTO team.r VALUES (1, 999, 1, 2), (2, 5, 1, 2);
	  SELECT count(*) FROM wals_refresh('team.m', 'touched')},
	q{SELECT model FROM wals_train('team.r', 'user_id', 'item_id', 'rating', model => 'team.m',
	  factors => 4, iterations => 2, warm_start => true)},
	q{SELECT model FROM wals_retrain('team.m', warm_start => true)})
{
	($ret, $out, $err) = as_role('alice', $sql);
	works($ret, $err, "alice, a member of team: $sql") or diag($err);
}
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT who, ',') FROM public.seen}),
	'team', "the forced policy ran as team, never as alice");
($ret, $out, $err) = as_role('alice', q{SELECT count(*) FROM wals_recommend(1, 5, 'team.m')});
like($err,
	qr/ERROR:  42501: row-level security of team.m_item_factors applies to role "alice", which serves model "team.m"/,
	'alice is refused serving what the policy that applies to her would filter');
$node->safe_psql('postgres', 'DELETE FROM public.seen');
is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_recommend(1, 5, 'team.m')}), '5',
	'a superuser is served team.m');
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT who, ',') FROM public.seen}),
	'team', 'as team sees it');
$node->safe_psql('postgres', 'DELETE FROM public.seen');

# 13. No internal error from a table owner's DDL: a rule on a factor table
# is refused by name, before a retraining or a refresh does anything.
as_role('mallory', q{SELECT model FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating',
  model => 'ruled', factors => 4, iterations => 2)});
for my $rule (
	q{CREATE RULE r AS ON DELETE TO mallory.ruled_user_factors DO INSTEAD NOTHING},
	q{CREATE RULE r AS ON UPDATE TO mallory.ruled_user_factors DO INSTEAD NOTHING},
	q{CREATE RULE r AS ON INSERT TO mallory.ruled_user_factors DO INSTEAD NOTHING},
	q{CREATE RULE r AS ON DELETE TO mallory.ruled_item_factors DO INSTEAD SELECT 1})
{
	my ($table) = $rule =~ /TO (\S+)/;
	($ret, $out, $err) = as_role('mallory', $rule);
	works($ret, $err, "mallory: $rule") or diag($err);
	for my $sql (
		q{SELECT model FROM wals_retrain('mallory.ruled')},
		q{SELECT wals_refresh_users('{1,2,3,999}', 'mallory.ruled')},
		q{SELECT wals_refresh_items('{1,2,3,999}', 'mallory.ruled')},
		q{SELECT count(*) FROM wals_recommend(1, 5, 'mallory.ruled')})
	{
		($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
		like($err, qr/ERROR:  55000: factor table \Q$table\E of model "mallory.ruled" has rule "r"/,
			"$rule, then the superuser: $sql");
	}
	as_role('mallory', "DROP RULE r ON $table");
}
($ret, $out, $err) = $node->psql('postgres', q{SELECT model FROM wals_retrain('mallory.ruled')});
works($ret, $err, 'once the rule is dropped, the model retrains') or diag($err);
ok(secret_intact(), 'the superuser\'s tables are intact');

# ---------------------------------------------------------------------------
# 6. Names: each role's names are its own, and nobody can block them.
($ret, $out, $err) = as_role('mallory',
	q{SELECT * FROM wals_train('mallory.r', 'user_id', 'item_id', model => 'public.r')});
like($err, qr/ERROR:  42501: permission denied for schema public/,
	'mallory cannot create a model in a schema she may not create in');
is($node->safe_psql('postgres', q{SET ROLE alice; SET search_path = alice, public;
  SELECT count(*) FROM wals_recommend(1, 5, 'shared')}), '5',
	'alice serves her own "shared" through her search_path');
my $blocker = $node->background_psql('postgres', on_error_stop => 0);
$blocker->set_query_timer_restart;
$blocker->query_safe(q{SET ROLE mallory;
  SELECT pg_advisory_lock(1463897427, hashtext('shared')),
         pg_advisory_lock(1463897427, hashtext('alice.shared')),
         pg_advisory_lock(hashtext('alice.shared'))});
($ret, $out, $err) = as_role('alice', q{SET statement_timeout = '20s';
  SELECT model FROM wals_train('alice.r', 'user_id', 'item_id', 'rating', model => 'alice.shared',
  factors => 4, iterations => 1)});
works($ret, $err, "advisory locks held by mallory do not block alice's training") or diag($err);
$blocker->quit;

# ---------------------------------------------------------------------------
# 7. Temporary sources are refused before anything is read.
($ret, $out, $err) = as_role('alice', q{CREATE TEMP TABLE t AS SELECT * FROM alice.r;
  SELECT * FROM wals_train('t', 'user_id', 'item_id', model => 'alice.tmp');});
like($err, qr/ERROR:  0A000: relation "t" given as "source" is temporary/, 'a temporary table is refused');
($ret, $out, $err) = as_role('alice', q{CREATE TEMP TABLE t AS SELECT * FROM alice.r;
  CREATE VIEW tv AS SELECT * FROM t;
  SELECT * FROM wals_train('tv', 'user_id', 'item_id', model => 'alice.tmp');});
like($err, qr/ERROR:  0A000: relation "tv" given as "source" is temporary/,
	'a view over a temporary table is refused');
($ret, $out, $err) = as_role('alice',
	q{SELECT * FROM wals_train('alice.r', 'user_id', 'item_id', model => 'pg_temp.tmp')});
like($err, qr/ERROR:  0A000: model "tmp" cannot be temporary/, 'a temporary model is refused');
is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_models WHERE model = 'tmp'}), '0',
	'no model was made');

# ---------------------------------------------------------------------------
# 8. Unknown ids cost nothing.
is($node->safe_psql('postgres', q{SET ROLE alice;
  SELECT count(*) FROM wals_recommend_batch(
    ARRAY(SELECT g FROM generate_series(1000001, 2000000) g), 10, 'alice.shared')}),
	'0', 'a batch of a million unknown users returns no rows');
is($node->safe_psql('postgres', q{SET ROLE alice;
  SELECT count(DISTINCT user_id) FROM wals_recommend_batch(
    ARRAY(SELECT g FROM generate_series(1, 30000) g), 10, 'alice.shared')}),
	'60', 'a long batch of mostly unknown users returns the known ones');
is($node->safe_psql('postgres', q{SET ROLE alice;
  SELECT (SELECT array_agg(item_id ORDER BY rank) FROM wals_recommend_batch(
            ARRAY(SELECT g FROM generate_series(1, 30000) g), 5, 'alice.shared') WHERE user_id = 7)
       = (SELECT array_agg(item_id) FROM wals_recommend(7, 5, 'alice.shared'))}),
	't', 'and the same rows as a single call');

# ---------------------------------------------------------------------------
# 9. Hopeless trainings are refused before the source is read: the view's
# function would say so if it ran.
as_role('alice', q{
CREATE FUNCTION alice.loud() RETURNS bool LANGUAGE plpgsql AS
  $$BEGIN RAISE WARNING 'the source was read'; RETURN true; END$$;
CREATE VIEW alice.lv AS SELECT * FROM alice.r WHERE alice.loud();});
my %hopeless = (
	'read-only transaction' => [
		q{BEGIN READ ONLY; SELECT * FROM wals_train('alice.lv', 'user_id', 'item_id', model => 'alice.x');},
		qr/25006: cannot execute wals_train\(\) in a read-only transaction/
	],
	'another role\'s model' => [
		q{SELECT * FROM wals_train('alice.lv', 'user_id', 'item_id', model => 'mallory.shared');},
		qr/42501: must be owner of model "mallory.shared"/
	],
	'warm start of another dimension' => [
		q{SELECT * FROM wals_train('alice.lv', 'user_id', 'item_id', model => 'alice.shared',
		  factors => 8, warm_start => true);},
		qr/22023: cannot warm start 8 factors from model "alice.shared", which has 4/
	],
	'absurd regularization' => [
		q{SELECT * FROM wals_train('alice.lv', 'user_id', 'item_id', regularization => 1e38);},
		qr/22023: invalid value for "regularization"/
	],
	'schema without CREATE' => [
		q{SELECT * FROM wals_train('alice.lv', 'user_id', 'item_id', model => 'mallory.mine');},
		qr/42501: permission denied for schema mallory/
	],
	'a GPU where there is none' => [
		q{SET wals.gpu_min_ratings = 0;
		  SELECT * FROM wals_train('alice.lv', 'user_id', 'item_id', model => 'alice.g', device => 'gpu');},
		qr/55000: "device" is 'gpu' but no GPU is usable/
	],);
for my $case (sort keys %hopeless)
{
	($ret, $out, $err) = as_role('alice', $hopeless{$case}[0]);
	like($err, $hopeless{$case}[1], "refused: $case");
	unlike($err, qr/the source was read/, "refused before reading: $case");
}
as_role('alice', q{CREATE TABLE alice.big AS SELECT * FROM alice.r, generate_series(1, 100) g;
  ANALYZE alice.big;});
$node->safe_psql('postgres', q{ALTER ROLE alice SET wals.max_memory = '100kB'});
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT * FROM wals_train('alice.big', 'user_id', 'item_id', model => 'alice.big');},
	extra_params => [ '-U', 'alice', '-v', 'VERBOSITY=verbose' ], on_error_stop => 0);
like($err, qr/53400: training needs about .* for the 36000 rows of "big" its statistics count/,
	'refused before reading: more than wals.max_memory, from the statistics of the source');

# 9. A limit a DBA sets for a role holds: the role cannot lift it, by SET,
# by a SET before the library is loaded, or for a sharded training.
for my $sql (
	q{SELECT 1 FROM wals_devices() LIMIT 1; SET wals.max_memory = 0;},
	q{SELECT 1 FROM wals_devices() LIMIT 1; SET wals.shard_message_size = '1GB';},
	q{SET wals.max_memory = 0; SELECT 1 FROM wals_devices() LIMIT 1;})
{
	($ret, $out, $err) = $node->psql('postgres', "$sql SHOW wals.max_memory;",
		extra_params => [ '-U', 'alice' ], on_error_stop => 0);
	like($err, qr/permission denied to set parameter/, "a role cannot lift a limit: $sql");
	like($out, qr/100kB$/, 'the limit stays');
}
($ret, $out, $err) = $node->psql('postgres',
	q{SET wals.max_memory = 0;
	  SELECT * FROM wals_train('alice.big', 'user_id', 'item_id', model => 'alice.big');},
	extra_params => [ '-U', 'alice' ], on_error_stop => 0);
like($err, qr/more than wals.max_memory \(100 kB\)/,
	'a limit set for the role holds when the role set it lower before the library was loaded');
$node->safe_psql('postgres', q{ALTER ROLE alice RESET wals.max_memory});

# Smaller: the test source of wals_evaluate is checked as a source is.
as_role('alice', q{CREATE SEQUENCE alice.s;
  CREATE TABLE alice.nan_test (user_id int, item_id int, rating real);
  INSERT INTO alice.nan_test VALUES (1, 1, 'NaN');});
for my $case (
	[ q{SELECT * FROM wals_evaluate('alice.shared', 'alice.s', 'user_id', 'item_id')}, qr/42809: "s" given as "test_source" is not a table or view/ ],
	[ q{SELECT * FROM wals_evaluate('alice.shared', 'alice.r', 'user_id', 'user_id')}, qr/22023: "user_col" and "item_col" are both column/ ],
	[ q{SELECT * FROM wals_evaluate('alice.shared', 'alice.nan_test', 'user_id', 'item_id', 'rating')}, qr/22003: test source has the non-finite rating NaN/ ])
{
	($ret, $out, $err) = as_role('alice', $case->[0]);
	like($err, $case->[1], "wals_evaluate refuses: $case->[0]");
}

# ---------------------------------------------------------------------------
# The fuzz.  Each case trains a fresh model f, edits it, then every function
# that reads a model is called from a new session and from the bystander,
# which cached the model before the edit; the model is then dropped.  Its
# trainings run in the backend alone (workers => 0): what the edits attack
# is read before any worker starts, and the 74 cases launched some 400
# parallel workers for nothing else.
my $calls = q{
SELECT count(*) FROM wals_recommend(1, 5, 'mallory.f');
SELECT count(*) FROM wals_recommend(1, 5, 'mallory.f', exclude_rated => false);
SELECT count(*) FROM wals_recommend_batch('{1,2,3,999999}', 5, 'mallory.f');
SELECT count(*) FROM wals_recommend_batch(ARRAY(SELECT generate_series(1, 20000)::bigint), 5, 'mallory.f');
SELECT count(*) FROM wals_recommend_items('{1,2,3}', NULL, 5, 'mallory.f');
SELECT count(*) FROM wals_similar_items(1, 5, 'mallory.f');
SELECT count(*) FROM wals_explain(1, 2, 'mallory.f');
SELECT count(*) FROM wals_rated_items(1, 'mallory.f');
SELECT wals_predict(1, 2, 'mallory.f');
SELECT count(*) FROM wals_evaluate('mallory.f', 'public.test_ratings', 'user_id', 'item_id', 'rating', 5);
SELECT wals_refresh_users('{1,2,999}', 'mallory.f');
SELECT * FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating', model => 'mallory.f',
  factors => 4, iterations => 1, warm_start => true, workers => 0) WHERE false;
};
my $internal = qr/ERROR:  XX\d\d\d|server closed the connection|connection to server was lost|terminat/;

my @catalog_edits = (
	q{factors = -1}, q{factors = 0}, q{factors = 65536}, q{factors = 2147483647},
	q{feedback = 'bogus'}, q{solver = 'bogus'}, q{cg_steps = 0}, q{cg_steps = -5},
	q{regularization = 'NaN'}, q{regularization = -1}, q{regularization = 'Infinity'},
	q{regularization = 1e38}, q{alpha = 'NaN'}, q{unobserved_weight = -1},
	q{user_factors = 'pg_class'::regclass}, q{user_factors = 'secret'::regclass},
	q{item_factors = 'secret'::regclass}, q{item_factors = user_factors},
	q{user_factors = 4000000000::oid::regclass}, q{item_factors = 0::regclass},
	q{source = 'secret'::regclass}, q{source = NULL}, q{source = 4000000000::oid::regclass},
	q{user_col = 'note'}, q{rating_col = 'id'}, q{version = -1}, q{schema = 'nowhere'},
	q{model = 'g'},);
my @table_edits = (
	q{ALTER TABLE mallory.f_user_factors ALTER factors TYPE bytea USING factors::text::bytea},
	q{ALTER TABLE mallory.f_item_factors ALTER factors TYPE bytea USING factors::text::bytea},
	q{ALTER TABLE mallory.f_user_factors ALTER factors TYPE text},
	q{ALTER TABLE mallory.f_item_factors ALTER factors TYPE float8[]},
	q{ALTER TABLE mallory.f_user_factors ALTER factors TYPE int[] USING '{1,2,3,4}'},
	q{ALTER TABLE mallory.f_user_factors ALTER factors DROP NOT NULL; UPDATE mallory.f_user_factors SET factors = NULL},
	q{ALTER TABLE mallory.f_item_factors ALTER factors DROP NOT NULL; UPDATE mallory.f_item_factors SET factors = NULL WHERE item_id = 2},
	q{UPDATE mallory.f_user_factors SET factors = array_fill(1::real, ARRAY[100000])},
	q{UPDATE mallory.f_item_factors SET factors = array_fill(1::real, ARRAY[100000]) WHERE item_id = 3},
	q{UPDATE mallory.f_item_factors SET factors = '{{1,2},{3,4}}'},
	q{UPDATE mallory.f_user_factors SET factors = '{NaN,1,1,1}'},
	q{UPDATE mallory.f_item_factors SET factors = '{Infinity,1,1,1}' WHERE item_id = 5},
	q{UPDATE mallory.f_item_factors SET factors = '{1,NULL,1,1}'},
	q{UPDATE mallory.f_user_factors SET factors = '{}'},
	q{ALTER TABLE mallory.f_item_factors DROP CONSTRAINT f_item_factors_pkey; INSERT INTO mallory.f_item_factors SELECT * FROM mallory.f_item_factors},
	q{ALTER TABLE mallory.f_item_factors DROP CONSTRAINT f_item_factors_pkey; ALTER TABLE mallory.f_item_factors ALTER item_id DROP NOT NULL; INSERT INTO mallory.f_item_factors VALUES (NULL, '{1,1,1,1}')},
	q{ALTER TABLE mallory.f_user_factors DROP CONSTRAINT f_user_factors_pkey; INSERT INTO mallory.f_user_factors SELECT * FROM mallory.f_user_factors},
	q{ALTER TABLE mallory.f_user_factors ALTER user_id TYPE int},
	q{ALTER TABLE mallory.f_user_factors ALTER user_id TYPE text},
	q{ALTER TABLE mallory.f_item_factors ALTER item_id TYPE numeric},
	q{ALTER TABLE mallory.f_user_factors ALTER rated TYPE text USING 'x'},
	q{ALTER TABLE mallory.f_user_factors ALTER rated TYPE bigint[] USING '{1,2}'},
	q{ALTER TABLE mallory.f_user_factors ALTER rated DROP NOT NULL; UPDATE mallory.f_user_factors SET rated = NULL},
	q{UPDATE mallory.f_user_factors SET rated = ''},
	q{UPDATE mallory.f_user_factors SET rated = '\\x00'},
	q{UPDATE mallory.f_user_factors SET rated = '\\x00ff'},
	q{UPDATE mallory.f_user_factors SET rated = '\\x0005020202'},
	q{UPDATE mallory.f_user_factors SET rated = '\\x00020600'},
	q{UPDATE mallory.f_user_factors SET rated = '\\x0301020304'},
	q{UPDATE mallory.f_user_factors SET rated = '\\x0002feffffffffffffffff0102'},
	q{UPDATE mallory.f_user_factors SET rated = '\\x02010200c0ff7f'},
	q{UPDATE mallory.f_user_factors SET rated = '\\x0201020000803f00'},
	q{UPDATE mallory.f_user_factors SET rated = '\\x02010200008080'},
	q{UPDATE mallory.f_user_factors SET rated = rated || '\\x00'},
	q{UPDATE mallory.f_user_factors SET rated = substr(rated, 1, octet_length(rated) - 1)},
	q{UPDATE mallory.f_user_factors SET rated = decode(repeat('ff', 100000), 'hex')},
	q{UPDATE mallory.f_user_factors SET rated = '\\x00ffffffff0f' || decode(repeat('01', 100000), 'hex')},
	q{UPDATE mallory.f_user_factors SET rated = (SELECT rated FROM mallory.f_user_factors WHERE user_id = 7)},
	q{ALTER TABLE mallory.f_user_factors DROP COLUMN rated},
	q{ALTER TABLE mallory.f_user_factors ADD COLUMN extra int, DROP COLUMN factors},
	q{DROP TABLE mallory.f_user_factors},
	q{DROP TABLE mallory.f_item_factors; CREATE VIEW mallory.f_item_factors AS SELECT 1::bigint AS item_id, '{1,1,1,1}'::real[] AS factors},
	q{ALTER TABLE mallory.f_item_factors RENAME TO elsewhere},
	q{TRUNCATE mallory.f_item_factors},
	q{TRUNCATE mallory.f_user_factors},
	q{ALTER TABLE mallory.f_item_factors ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
	  CREATE POLICY p ON mallory.f_item_factors USING (mallory.spy())},);

# One session ends a case and begins the next, as a new session for each
# would cost a connection more: the superuser drops the model (the count of
# models dropped, which must be 1, is its first line of output), mallory
# clears what the edit left and, but after the last case, trains the next
# case's model, f (its last line).
my $drop_model = q{SELECT count(wals_drop_model(format('%I.%I', schema, model))) FROM wals_models
  WHERE schema IN ('mallory', 'nowhere') AND model IN ('f', 'g');};
my $clear = q{
SET ROLE mallory;
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT oid::regclass AS rel, relkind FROM pg_class
    WHERE relnamespace = 'mallory'::regnamespace
      AND relname IN ('elsewhere', 'f_user_factors', 'f_item_factors') LOOP
    EXECUTE format('DROP %s %s', CASE r.relkind WHEN 'v' THEN 'VIEW' ELSE 'TABLE' END, r.rel);
  END LOOP;
END $$;};
my $next_model = $clear . q{
SELECT model FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating', model => 'f',
  factors => 4, iterations => 1, workers => 0);
GRANT SELECT ON mallory.f_user_factors, mallory.f_item_factors TO PUBLIC;};
my @edits = ((map { [ 'postgres', "UPDATE wals_models SET $_ WHERE schema = 'mallory' AND model = 'f'" ] } @catalog_edits),
	(map { [ 'mallory', $_ ] } @table_edits));

($ret, $out, $err) = $node->psql('postgres', $next_model, on_error_stop => 0);
die "could not train the model of the fuzz: $err" if $out ne 'f' || $err =~ /ERROR/;
my $cases = 0;
for my $k (0 .. $#edits)
{
	my ($who, $sql) = @{ $edits[$k] };
	my $last = $k == $#edits;
	$bystander->query(qq{SET ROLE postgres; $calls});
	$bystander->{stderr} = '';
	($ret, $out, $err) = as_role($who, $sql);
	die "could not apply the edit $sql: $err" if $ret != 0 || $err =~ /ERROR/;

	my $problems = '';
	for my $role ('postgres', 'alice')
	{
		($ret, $out, $err) = as_role($role, $calls);
		$problems .= "$role: $1\n" while $err =~ /^(.*$internal.*)$/mg;
	}
	$bystander->query("\\set VERBOSITY verbose\n$calls");
	$problems .= "cached: $1\n" while $bystander->{stderr} =~ /^(.*$internal.*)$/mg;
	$bystander->{stderr} = '';
	($ret, $out, $err) = $node->psql('postgres', $drop_model . ($last ? $clear : $next_model),
		on_error_stop => 0);
	my @lines = split /\n/, $out;
	$problems .= "drop: $out $err\n"
	  if ($lines[0] // '') ne '1' || $err =~ /ERROR/ || (!$last && @lines != 2);
	is($problems, '', "fuzz, as $who: $sql");
	$cases++;
}
ok(secret_intact(), "after $cases fuzz cases the superuser's tables are intact");
# A row-level security policy on a model's table runs as the model's owner,
# whoever serves it (roles.c), and so never as the superuser.
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.seen WHERE who = 'postgres'}), '0',
	"and no code of mallory ran as the superuser");

# ---------------------------------------------------------------------------
# 6, 8. Privileges before locks, and a relation named by OID needs USAGE on
# its schema as one named by name does.  mallory holds SELECT on a table in
# a schema it may not use: named by OID, it is refused as a source, a test
# source and held-out cells, and wals_shards() on a partitioned table of
# that schema locks none of its partitions (the superuser's TRUNCATE does
# not wait behind mallory's open transaction).
$node->safe_psql(
	'postgres', q{
CREATE SCHEMA hidden;
CREATE TABLE hidden.parted (user_id int, item_id int) PARTITION BY HASH (user_id);
CREATE TABLE hidden.parted_0 PARTITION OF hidden.parted FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE hidden.parted_1 PARTITION OF hidden.parted FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE hidden.plain AS
  SELECT u AS user_id, (u * 7 + g) % 30 + 1 AS item_id FROM generate_series(1, 60) u, generate_series(1, 5) g;
GRANT SELECT ON hidden.plain, hidden.parted TO mallory;
});
my $plain = $node->safe_psql('postgres', q{SELECT 'hidden.plain'::regclass::oid});
my $parted = $node->safe_psql('postgres', q{SELECT 'hidden.parted'::regclass::oid});
($ret, $out, $err) = as_role('mallory', q{SELECT count(*) FROM hidden.plain});
like($err, qr/42501: permission denied for schema hidden/, 'mallory cannot read the table by name');
for my $sql (
	qq{SELECT * FROM wals_train($plain, 'user_id', 'item_id', model => 'mallory.stolen', factors => 2, iterations => 1)},
	qq{SELECT * FROM wals_train('mallory.r', 'user_id', 'item_id', model => 'mallory.stolen', factors => 2, iterations => 1, validation_table => $plain)},
	qq{SELECT * FROM wals_evaluate('mallory.shared', $plain, 'user_id', 'item_id')},
	qq{SELECT * FROM wals_shards($parted)})
{
	($ret, $out, $err) = as_role('mallory', $sql);
	like($err, qr/42501: permission denied for schema hidden/, "refused by OID: $sql");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_models WHERE model = 'stolen'}), '0',
	'no model was trained from the hidden table');
my $holder = $node->background_psql('postgres', on_error_stop => 0);
$holder->set_query_timer_restart;
$holder->query(qq{SET ROLE mallory; BEGIN; SELECT count(*) FROM wals_shards($parted);});
($ret, $out, $err) = $node->psql('postgres', q{SET lock_timeout = '3s'; TRUNCATE hidden.parted;});
works($ret, $err, 'the owner\'s TRUNCATE does not wait for the transaction that called wals_shards()')
  or diag($err);
$holder->query('ROLLBACK');

# 7. Lock keys: alice.a57120 and mallory.m2869 had the same 32-bit lock key
# (the hash of schema and name): a training of mallory's held in an open
# transaction must not make alice's wait.
as_role('alice', q{SELECT model FROM wals_train('alice.r', 'user_id', 'item_id', model => 'alice.a57120',
  factors => 2, iterations => 1)});
$holder->query(q{SET ROLE mallory; BEGIN;
  SELECT model FROM wals_train('mallory.r', 'user_id', 'item_id', model => 'mallory.m2869',
    factors => 2, iterations => 1);});
($ret, $out, $err) = as_role('alice', q{SET lock_timeout = '3s';
  SELECT model FROM wals_train('alice.r', 'user_id', 'item_id', model => 'alice.a57120',
    factors => 2, iterations => 1);
  SELECT wals_drop_model('alice.a57120');});
works($ret, $err, 'alice trains and drops her model while mallory holds the lock of its namesake')
  or diag($err);
$holder->query('ROLLBACK');
$holder->quit;

# ---------------------------------------------------------------------------
# 4. Code that wals runs calls wals again.  A row-security policy on
# mallory's user factor table serves eight other models, enough to evict
# every entry of the cache, the one the outer call is reading included:
# serving from there works, and nothing the outer call holds is freed.
# What writes (training, tuning, refresh, drop) is refused there, and from
# a source view that a training reads.
my $nest = q{
SELECT model FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating', model => 'victim',
  factors => 4, iterations => 1);
GRANT SELECT ON mallory.victim_user_factors, mallory.victim_item_factors TO PUBLIC;
};
$nest .= qq{SELECT model FROM wals_train('mallory.r', 'user_id', 'item_id', 'rating',
  model => 'n$_', factors => 4, iterations => 1);
GRANT SELECT ON mallory.n${_}_user_factors, mallory.n${_}_item_factors TO PUBLIC;
} for 1 .. 8;
$nest .= q{
CREATE FUNCTION mallory.serve_all() RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 8 LOOP
    PERFORM count(*) FROM public.wals_recommend(1, 3, 'mallory.n' || i);
  END LOOP;
  RETURN true;
END $$;
CREATE FUNCTION mallory.nested(what text) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE what;
  RETURN true;
END $$;
CREATE TABLE mallory.nested_sql (sql text);
INSERT INTO mallory.nested_sql VALUES ('SELECT mallory.serve_all()');
GRANT SELECT ON mallory.nested_sql TO PUBLIC;
ALTER TABLE mallory.victim_user_factors ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY p ON mallory.victim_user_factors
  USING (mallory.nested((SELECT sql FROM mallory.nested_sql)));
};
($ret, $out, $err) = as_role('mallory', $nest);
works($ret, $err, 'mallory trains nine models and puts a policy that serves eight on one') or diag($err);
for my $role ('mallory', 'postgres')
{
	for my $sql (q{SELECT count(*) FROM wals_recommend(1, 5, 'mallory.victim')},
		q{SELECT count(*) FROM wals_recommend_batch('{1,2,3}', 5, 'mallory.victim')},
		q{SELECT count(*) FROM wals_rated_items(1, 'mallory.victim')})
	{
		($ret, $out, $err) = as_role($role, $sql);
		works($ret, $err, "as $role, served through a policy that serves eight other models: $sql")
		  or diag($err);
	}
}
($ret, $out, $err) = as_role('alice', q{SELECT count(*) FROM wals_recommend(1, 5, 'mallory.victim')});
like($err, qr/ERROR:  42501: row-level security of mallory.victim_user_factors applies to role "alice"/,
	'alice, whom the forced policy would filter, is refused');
for my $write (
	q{SELECT count(*) FROM public.wals_train('mallory.r', 'user_id', 'item_id', model => 'mallory.victim', factors => 4, iterations => 1)},
	q{SELECT count(*) FROM public.wals_tune('mallory.r', 'user_id', 'item_id', model => 'mallory.t', max_trials => 1)},
	q{SELECT public.wals_refresh_users('{1}', 'mallory.victim')},
	q{SELECT public.wals_drop_model('mallory.victim')},
	q{SELECT public.wals_drop_model('mallory.n1')})
{
	as_role('mallory', qq{UPDATE mallory.nested_sql SET sql = \$q\$$write\$q\$});
	($ret, $out, $err) = as_role('mallory', q{SELECT count(*) FROM wals_recommend(1, 5, 'mallory.victim')});
	like($err, qr/55006: wals_\w+\(\) cannot be called while another wals function is running/,
		"refused inside serving: $write");
}
($ret, $out, $err) = as_role('mallory', q{
CREATE VIEW mallory.trains_inside AS
  SELECT user_id, item_id FROM mallory.r WHERE mallory.nested((SELECT sql FROM mallory.nested_sql));
SELECT count(*) FROM wals_train('mallory.trains_inside', 'user_id', 'item_id', model => 'mallory.outer',
  factors => 4, iterations => 1)});
like($err, qr/55006: wals_drop_model\(\) cannot be called while another wals function is running/,
	'refused inside a training, from its source view');
# a procedure that commits cannot run there at all: serving is a query
as_role('mallory', q{UPDATE mallory.nested_sql SET sql = $q$CALL public.wals_tune_concurrently('mallory.r', 'user_id', 'item_id', model => 'mallory.t', max_trials => 1)$q$});
($ret, $out, $err) = as_role('mallory', q{SELECT count(*) FROM wals_recommend(1, 5, 'mallory.victim')});
like($err, qr/25001: wals_tune_concurrently cannot run inside a transaction block/,
	'wals_tune_concurrently refused inside serving');
as_role('mallory', q{UPDATE mallory.nested_sql SET sql = 'SELECT mallory.serve_all()'});
($ret, $out, $err) = as_role('mallory', q{
SELECT count(*) FROM wals_train('mallory.trains_inside', 'user_id', 'item_id', model => 'mallory.outer',
  factors => 4, iterations => 1)});
works($ret, $err, 'a training whose source view serves other models trains') or diag($err);
($ret, $out, $err) = as_role('mallory', q{
DO $$
BEGIN
  BEGIN
    PERFORM count(*) FROM wals_train('mallory.trains_inside', 'user_id', 'item_id',
      model => 'mallory.outer', factors => 4, iterations => 1, seed => -1);
  EXCEPTION WHEN OTHERS THEN
    NULL;
  END;
  PERFORM count(*) FROM wals_train('mallory.r', 'user_id', 'item_id', model => 'mallory.after',
    factors => 4, iterations => 1);
END $$});
works($ret, $err, 'a call caught in an EXCEPTION block leaves the next one free to write') or diag($err);
ok(secret_intact(), 'the superuser\'s tables are intact');

# ---------------------------------------------------------------------------
# Serving on a hot standby, where training is refused before reading.
$node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SET ROLE alice;
  SELECT count(*) FROM wals_recommend(1, 5, 'alice.shared')}), '5', 'a hot standby serves');
($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT * FROM wals_train('alice.lv', 'user_id', 'item_id', model => 'alice.x')");
like($err, qr/25006: cannot execute wals_train\(\) in a read-only transaction/,
	'a hot standby refuses training');
unlike($err, qr/the source was read/, 'before reading');
$standby->stop;

# ---------------------------------------------------------------------------
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $start_time,
	'the server never restarted');
is($bystander->query_safe('SELECT pg_backend_pid()'), $bystander_pid,
	'the bystander session lived through everything');
$bystander->quit;
$node->stop;
done_testing();
