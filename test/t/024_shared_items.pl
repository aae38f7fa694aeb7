
# One copy of a model's items for every backend (src/serve/items.c): the
# training builds the items of the version it stores, and every backend
# maps them at its first call, building nothing; a retraining's version is
# ready when it commits, and the first backend that loads it retires the
# older one; what a backend builds itself is said at DEBUG1, so that each
# build is counted here.  After a restart (segments die with the server,
# the registry's files do not, and a stale one is never taken) and on a
# standby, the first backend copies the image the training wrote
# (src/catalog/images.c) and builds nothing either.  Then the cases where a
# backend builds: a version the files no longer name (a REPEATABLE READ
# snapshot of a retired one), a version without an image and, never
# shared, an item table that forces row security on its owner.  Answers
# always equal a plain scan of the factor tables in SQL.
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
CREATE ROLE tenant LOGIN;
CREATE SCHEMA tenant AUTHORIZATION tenant;
GRANT USAGE ON SCHEMA tenant TO PUBLIC;
SET ROLE tenant;
CREATE TABLE tenant.r AS
  SELECT u AS user_id, (u * 7 + g * 13) % 900 + 1 AS item_id, 1 + (u + g) % 5 AS rating
  FROM generate_series(1, 3000) u, generate_series(1, 12) g;
SELECT model FROM wals_train('tenant.r', 'user_id', 'item_id', 'rating', model => 'tenant.m',
  factors => 16, iterations => 3);
GRANT SELECT ON tenant.m_user_factors, tenant.m_item_factors TO PUBLIC;
});

my $build_message = qr/computing their Gram and index/;
my $copy_message = qr/their Gram and index from their image/;
my $patched_message = qr/from the image of an earlier version, and what (\d+) refresh/;

# The output of a call made in a new session, the number of builds of the
# items (and of the cosine index), of copies of a version's own image, and
# the number of refreshes whose changes were put in place over an earlier
# version's image.
sub call
{
	my ($sql, $on) = @_;
	$on //= $node;
	my ($ret, $out, $err) = $on->psql('postgres',
		"SET client_min_messages = debug1;\n$sql", on_error_stop => 1);
	die "$sql failed: $err" if $ret != 0;
	my $builds = () = $err =~ /$build_message/g;
	my $cosine = () = $err =~ /indexing the unit rows/g;
	my $copies = () = $err =~ /$copy_message/g;
	my ($refreshes) = $err =~ /$patched_message/;
	return ($out, $builds, $cosine, $copies, $refreshes // 0);
}

# The top 5 of user $u as wals_recommend gives them, and as a plain scan.
my $served = q{SELECT string_agg(item_id || ':' || round(score::numeric, 4), ',' ORDER BY ord)
  FROM wals_recommend(%d, 5, 'tenant.m', exclude_rated => false) WITH ORDINALITY r(item_id, score, ord)};
my $scanned = q{SELECT string_agg(item_id || ':' || round(s::numeric, 4), ',' ORDER BY s DESC, item_id)
  FROM (SELECT i.item_id, (SELECT sum(a * b) FROM unnest(u.factors, i.factors) AS p(a, b))::real AS s
        FROM tenant.m_user_factors u, tenant.m_item_factors i WHERE u.user_id = %d
        ORDER BY s DESC, i.item_id LIMIT 5) t};

sub files
{
	my ($on) = @_;
	$on //= $node;
	return $on->safe_psql('postgres',
		q{SELECT count(*) FROM pg_ls_dir('pg_stat_tmp') f WHERE f ~ '^wals\.[0-9.]+$'});
}

sub version
{
	return $node->safe_psql('postgres', q{SELECT version FROM wals_models WHERE model = 'm'});
}

# 1. New backends build nothing: the training did.
for my $u (1, 2, 3)
{
	my ($out, $builds) = call(sprintf($served, $u));
	is($builds, 0, "a new backend serving user $u builds nothing");
	is($out, $node->safe_psql('postgres', sprintf($scanned, $u)),
		"user $u: the answer of a plain scan");
}
is(files(), '1', 'one version is published');

# wals_similar_items's index of the unit rows: built by the first backend
# that needs it, for the others.
my $similar = q{SELECT string_agg(item_id::text, ',' ORDER BY ord)
  FROM wals_similar_items(3, 5, 'tenant.m') WITH ORDINALITY r(item_id, score, ord)};
my ($similar1, $b1, $cosine1) = call($similar);
my ($similar2, $b2, $cosine2) = call($similar);
is("$b1 $cosine1 $b2 $cosine2", '0 1 0 0',
	'the first backend serving similar items builds their index, the next maps it');
is($similar2, $similar1, 'and both give the same items');
is($similar1, $node->safe_psql('postgres', q{SELECT string_agg(item_id::text, ',' ORDER BY s DESC, item_id)
  FROM (SELECT i.item_id, (SELECT sum(a * b) FROM unnest(t.factors, i.factors) AS p(a, b))
          / sqrt((SELECT sum(a * a) FROM unnest(i.factors) a) * (SELECT sum(a * a) FROM unnest(t.factors) a)) AS s
        FROM tenant.m_item_factors t, tenant.m_item_factors i
        WHERE t.item_id = 3 AND i.item_id <> 3 ORDER BY s DESC, i.item_id LIMIT 5) x}),
	'the items of highest cosine, as a plain scan finds them');
is(files(), '2', 'the version\'s items and their cosine index are published');

# 2. A retraining builds its own version; readers after its commit build
# nothing, and the first of them retires the version before.
my ($out, $builds) = call(q{SELECT model FROM wals_retrain('tenant.m', seed => 7)});
is($builds, 1, 'the retraining builds the items of its version');
is(files(), '3', 'until a reader loads the new version, both versions are published');
($out, $builds) = call(sprintf($served, 1));
is($builds, 0, 'the first call after the retraining builds nothing');
is($out, $node->safe_psql('postgres', sprintf($scanned, 1)), 'and serves the new version');
is(files(), '1', 'and retires the version before, its cosine index with it');

# 3. A session that keeps a snapshot of the version before, through a
# retraining and the retirement: it still serves that version, and a new
# REPEATABLE READ session with an old snapshot builds its own copy of it.
my $old = $node->background_psql('postgres', on_error_stop => 0);
$old->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ});
my $old_answer = $old->query_safe(sprintf($served, 5));
my $holder = $node->background_psql('postgres', on_error_stop => 0);
$holder->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM tenant.r});
call(q{SELECT model FROM wals_retrain('tenant.m', seed => 8)});
call(sprintf($served, 1));
is($old->query_safe(sprintf($served, 5)), $old_answer,
	'a snapshot taken before the retraining still serves the version it saw');
my $holder_answer = $holder->query_safe(sprintf($served, 5));
is($holder_answer, $old_answer,
	'another snapshot of that version, loaded after its retirement, gives its answers');
$old->query_safe('COMMIT');
$holder->query_safe('COMMIT');
$old->quit;
$holder->quit;

# 4. An item table that forces row security on its owner is never shared:
# each backend reads what the owner sees through the policies itself.
$node->safe_psql(
	'postgres', q{
SET ROLE tenant;
ALTER TABLE tenant.m_item_factors ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY few ON tenant.m_item_factors USING (item_id <= 300);});
($out, $builds) = call(q{SELECT count(*) FROM wals_recommend(1, 900, 'tenant.m', exclude_rated => false)});
is($out, '300', 'under the forced policy, the owner\'s 300 items are served');
is($builds, 1, 'by a copy of the backend\'s own');
$node->safe_psql(
	'postgres', q{
SET ROLE tenant;
DROP POLICY few ON tenant.m_item_factors;
ALTER TABLE tenant.m_item_factors NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;});
($out, $builds) = call(q{SELECT count(*) FROM wals_recommend(1, 900, 'tenant.m', exclude_rated => false)});
is($out, '900', 'without it, every item');
is($builds, 0, 'from the shared copy');

# 5. A training rolled back leaves a version no row will name; the next
# version loaded retires it.
$node->safe_psql('postgres', q{BEGIN;
  SELECT model FROM wals_retrain('tenant.m', seed => 9);
  ROLLBACK;});
is(files(), '2', 'a training rolled back leaves its version published');
call(q{SELECT model FROM wals_retrain('tenant.m', seed => 10)});
call(sprintf($served, 1));
is(files(), '1', 'until a later version is loaded');

# 5a. Retrainings with no call between them keep two versions, not one
# each: a training retires the versions before the one it replaces.
call(qq{SELECT model FROM wals_retrain('tenant.m', seed => $_)}) for (21, 22, 23);
is(files(), '2', 'three retrainings in a row leave the version they replaced and the last');
call(sprintf($served, 1));
is(files(), '1', 'whose first reader retires the other');

# 6. A dropped model's version goes at the next publication in the database.
$node->safe_psql(
	'postgres', q{
SET ROLE tenant;
SELECT model FROM wals_train('tenant.r', 'user_id', 'item_id', model => 'tenant.gone',
  factors => 4, iterations => 1);
SELECT wals_drop_model('tenant.gone');});
is(files(), '2', 'a dropped model\'s version stays until the next publication');
is($node->safe_psql('postgres', q{SELECT count(DISTINCT item_table) FROM wals_serving_images}), '1',
	'but not its image');
call(q{SELECT model FROM wals_retrain('tenant.m', seed => 11)});
call(sprintf($served, 1));
is(files(), '1', 'which retires it');

# 6a. A refresh that changes items publishes its own serving version,
# patched from the one before: readers after it build nothing, and are
# served what a plain scan gives.
$node->safe_psql('postgres', q{
INSERT INTO tenant.r VALUES (1, 901, 5), (2, 901, 4), (3, 5, 2);
SET ROLE tenant;
SELECT wals_refresh_items('{5, 901}', 'tenant.m');});
($out, $builds) = call(sprintf($served, 1));
is($builds, 0, 'after a refresh of items, a new backend builds nothing');
is($out, $node->safe_psql('postgres', sprintf($scanned, 1)), 'and is served the refreshed items');
is($node->safe_psql('postgres', q{SELECT count(*) FROM tenant.m_item_factors WHERE item_id = 901}), '1',
	'the new item has factors');
is(files(), '1', 'the version before is retired by the first reader of the new one');

# 6b. A dropped database's versions go at the next publication in any
# database: no backend of its own is left to retire them.
$node->safe_psql('postgres', 'CREATE DATABASE gone_db');
$node->safe_psql(
	'gone_db', q{
CREATE EXTENSION wals;
CREATE TABLE r AS SELECT u AS user_id, u % 50 + 1 AS item_id FROM generate_series(1, 400) u;
SELECT model FROM wals_train('r', 'user_id', 'item_id', model => 'm', factors => 4, iterations => 1);});
is(files(), '2', 'another database\'s version has its own file');
$node->safe_psql('postgres', 'DROP DATABASE gone_db');
is(files(), '2', 'which stays when the database is dropped');
call(q{SELECT model FROM wals_retrain('tenant.m', seed => 12)});
call(sprintf($served, 1));
is(files(), '1', 'until a publication in another database retires it');

# 7. After a crash the segments are gone and the files left name nothing
# (or another segment, never taken for the model's): the first backend
# copies the version's image, the next ones map its copy.  The crash comes
# in the middle of a retraining, which is then rolled back, image and all.
my $crashed = $node->background_psql('postgres', on_error_stop => 0);
$crashed->query_until(qr/starting/, q{\echo starting
SELECT model FROM wals_retrain('tenant.m', iterations => 100000, tolerance => 0);
});
$node->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE '%iteration%of 100000%'})
  or die 'the retraining did not start';
$node->stop('immediate');
eval { $crashed->quit };
$node->start;
my $copies;
($out, $builds, undef, $copies) = call(sprintf($served, 1));
is("$builds $copies", '0 1', 'after a crash, the first call copies the image and builds nothing');
is($out, $node->safe_psql('postgres', sprintf($scanned, 1)), 'and serves the model');
($out, $builds, undef, $copies) = call(sprintf($served, 2));
is("$builds $copies", '0 0', 'the next backend maps its copy');
is($node->safe_psql('postgres', q{SELECT count(DISTINCT version) FROM wals_serving_images}), '1',
	'one image is kept, the version before the rolled back retraining\'s');

# 7b. A crash in the middle of a store: the retraining has written the
# users' rows and waits for a row lock another session holds on an item's
# before it deletes the item rows.  After the restart the model is the one
# before, whole, served from its image; nothing of the store is left.
my $version_before = version();
my $locker = $node->background_psql('postgres');
$locker->query_safe(q{BEGIN; SELECT 1 FROM tenant.m_item_factors WHERE item_id = 7 FOR UPDATE});
my $storing = $node->background_psql('postgres', on_error_stop => 0);
$storing->query_until(qr/starting/, q{\echo starting
SELECT model FROM wals_retrain('tenant.m', seed => 77);
});
$node->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%seed => 77%'})
  or die 'the retraining did not reach the item rows';
is($node->safe_psql('postgres', q{SELECT phase FROM wals_progress WHERE phase IS NOT NULL}), 'storing the factors',
	'the retraining is storing when the server crashes');
$node->stop('immediate');
eval { $storing->quit };
eval { $locker->quit };
$node->start;
($out, $builds, undef, $copies) = call(sprintf($served, 3));
is("$builds $copies", '0 1', 'after a crash in a store, the version before is copied from its image');
is($out, $node->safe_psql('postgres', sprintf($scanned, 3)), 'and serves what a plain scan gives');
is(version(), $version_before, 'the catalog names the version before');
is($node->safe_psql('postgres', q{SELECT count(*) FROM tenant.m_user_factors}), '3000',
	'whose user rows are all there, once');

# 7a. A version without an image (deleted here by hand, as a superuser may)
# is built by its first reader after a restart, as before.
$node->safe_psql('postgres', q{DELETE FROM wals_serving_images});
$node->restart;
($out, $builds, undef, $copies) = call(sprintf($served, 1));
is("$builds $copies", '1 0', 'without an image, the first call after a restart builds');
is($out, $node->safe_psql('postgres', sprintf($scanned, 1)), 'the same answer');

# 8. A standby serves the replayed version; its first backend copies the
# replayed image for the standby's others, building nothing.
$node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->start;
call(q{SELECT model FROM wals_retrain('tenant.m', seed => 12)});
my $whole = $node->safe_psql('postgres', q{SELECT sum(octet_length(data)) FROM wals_serving_images});
$node->wait_for_catchup($standby);
($out, $builds, undef, $copies) = call(sprintf($served, 1), $standby);
is($out, $node->safe_psql('postgres', sprintf($scanned, 1)), 'a standby serves the new version');
is("$builds $copies", '0 1', 'copied from its image by its first backend, built by none');
($out, $builds, undef, $copies) = call(sprintf($served, 2), $standby);
is("$builds $copies", '0 0', 'and mapped by the next');

# A refresh of items writes what it changed as an image of its own, beside
# the training's: the standby's first reader copies the training's image
# and puts the refresh's changes in place, reading nothing of the item table.
$node->safe_psql('postgres', q{
INSERT INTO tenant.r VALUES (4, 902, 5), (5, 902, 3);
SET ROLE tenant;
SELECT wals_refresh_items('{902}', 'tenant.m');});
is($node->safe_psql('postgres', q{SELECT count(DISTINCT version) FROM wals_serving_images}), '2',
	'a refresh of items keeps the image before and adds its own');
$node->wait_for_catchup($standby);
my $refreshes;
($out, $builds, undef, $copies, $refreshes) = call(sprintf($served, 4), $standby);
is("$builds $copies $refreshes", '0 0 1',
	'the standby\'s first reader copies the image before and what the refresh changed');
is($out, $node->safe_psql('postgres', sprintf($scanned, 4)), 'and serves the refreshed items');
($out, $builds, undef, $copies, $refreshes) = call(sprintf($served, 5), $standby);
is("$builds $copies $refreshes", '0 0 0', 'the next backend maps its copy');

# A second refresh, then a restart: the first reader merges both refreshes'
# changes (an item changed by both takes the second's row).  A refresh of
# every item writes that much, and the one after, whose changes would then
# outweigh the image they change, writes its whole copy in their place.
$node->safe_psql('postgres', q{
INSERT INTO tenant.r VALUES (6, 902, 1), (7, 903, 4), (8, 5, 5);
SET ROLE tenant;
SELECT wals_refresh_items('{5, 902, 903}', 'tenant.m');});
$node->restart;
($out, $builds, undef, $copies, $refreshes) = call(sprintf($served, 6));
is("$builds $copies $refreshes", '0 0 2', 'after a restart, two refreshes are put in place');
is($out, $node->safe_psql('postgres', sprintf($scanned, 6)), 'which serves what a plain scan gives');
is($node->safe_psql('postgres', q{SELECT count(*) FROM tenant.m_item_factors i, tenant.m_user_factors u
  WHERE u.user_id = 6 AND i.item_id IN (5, 902, 903)
  AND round(wals_predict(6, i.item_id, 'tenant.m')::numeric, 5) =
      round((SELECT sum(a * b) FROM unnest(u.factors, i.factors) AS p(a, b))::real::numeric, 5)}), '3',
	'the rows of both refreshes, the second\'s where both changed an item');
my $all = q{SET ROLE tenant;
SELECT wals_refresh_items(ARRAY(SELECT item_id FROM tenant.m_item_factors), 'tenant.m');};
my $kept = q{SELECT count(DISTINCT version) || ' ' || sum(octet_length(data)) FROM wals_serving_images};
my ($versions, $bytes);
my $most = 0;
my $refreshed = 0;
do
{
	$node->safe_psql('postgres', $all);
	$refreshed++;
	($versions, $bytes) = split / /, $node->safe_psql('postgres', $kept);
	$most = $bytes if $bytes > $most;
} while ($versions > 1 && $refreshed < 5);
ok($refreshed >= 2 && $versions == 1, "the changes of every item are kept ($refreshed refreshes) until they would outweigh the image")
  or diag("$versions versions kept after $refreshed refreshes");
cmp_ok($most, '<=', 2.1 * $whole, 'so that they never weigh more than it');
is($node->safe_psql('postgres', q{SELECT bool_and(version = (SELECT serving_version FROM wals_models WHERE model = 'm'))
  FROM wals_serving_images}), 't', 'then the whole copy replaces them');
$node->wait_for_catchup($standby);
($out, $builds, undef, $copies, $refreshes) = call(sprintf($served, 7), $standby);
is("$builds $copies $refreshes", '0 1 0', 'which the standby copies');
is($out, $node->safe_psql('postgres', sprintf($scanned, 7)), 'and serves');
$standby->stop;

# 9. A relation of that name that the extension did not make (here a
# superuser's, in the extension's schema) is neither written nor read as
# the extension's owner: trainings keep no image, and readers build.
$node->safe_psql('postgres', q{
ALTER EXTENSION wals DROP TABLE wals_serving_images;
ALTER TABLE wals_serving_images RENAME TO wals_serving_images_kept;
CREATE TABLE wals_serving_images (item_table oid, version bigint, chunk int, data bytea);});
($out, $builds) = call(q{SELECT model FROM wals_retrain('tenant.m', seed => 13)});
is($builds, 1, 'beside a table wals did not make, the retraining builds its items');
is($node->safe_psql('postgres', q{SELECT count(*) FROM wals_serving_images}), '0',
	'and writes no image into it');
$node->safe_psql('postgres', q{INSERT INTO wals_serving_images
  SELECT item_table, version, chunk, data FROM wals_serving_images_kept;
UPDATE wals_serving_images SET version = (SELECT version FROM wals_models WHERE model = 'm');});
$node->restart;
($out, $builds, undef, $copies) = call(sprintf($served, 1));
is("$builds $copies", '1 0', 'nor reads one from it: the first call after a restart builds');
is($out, $node->safe_psql('postgres', sprintf($scanned, 1)), 'and serves the model');

$node->stop;
done_testing();
