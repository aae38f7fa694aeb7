-- Privileges: every function runs as its caller; only wals writes its
-- catalog; models live in schemas and belong to the owner of their factor
-- tables; a role that only serves needs exactly the grants doc/security.md lists;
-- names with quotes, spaces, upper case and schemas work in every function.
SET client_min_messages = warning;
SELECT count(*) AS security_definer
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'wals'
WHERE p.prosecdef;

CREATE ROLE wals_trainer;
CREATE ROLE wals_app;
CREATE SCHEMA "Shop" AUTHORIZATION wals_trainer;
CREATE SCHEMA app AUTHORIZATION wals_app;

-- every role reads the catalog; none writes it
SELECT c.relname, has_table_privilege('wals_app', c.oid, 'SELECT') AS sel,
       has_table_privilege('wals_app', c.oid, 'INSERT') AS ins,
       has_table_privilege('wals_app', c.oid, 'UPDATE') AS upd,
       has_table_privilege('wals_app', c.oid, 'DELETE') AS del
FROM pg_class c WHERE c.relname IN ('wals_models', 'wals_training_log') ORDER BY 1;
SELECT has_sequence_privilege('wals_app', 'wals_model_version_seq', 'USAGE') AS seq_usage;
-- what wals keeps for itself (a version's state, the images of its
-- served items) no role reads or writes
SELECT c.relname, has_table_privilege('wals_app', c.oid, 'SELECT') AS sel,
       has_table_privilege('wals_app', c.oid, 'INSERT') AS ins,
       has_table_privilege('wals_app', c.oid, 'UPDATE') AS upd,
       has_table_privilege('wals_app', c.oid, 'DELETE') AS del
FROM pg_class c WHERE c.relname IN ('wals_model_state', 'wals_serving_images') ORDER BY 1;

SET ROLE wals_trainer;
CREATE TABLE "Shop"."Item Views" ("User Id" int, "Item""Id" int, "Times" real);
INSERT INTO "Shop"."Item Views"
SELECT u, (u * 7 + g * 13) % 30 + 1, 1 + (u + g) % 3 FROM generate_series(1, 100) u, generate_series(1, 5) g;
SELECT model, users, items FROM wals_train('"Shop"."Item Views"', 'User Id', 'Item"Id', 'Times',
    model => 'Shop.Shop Model', factors => 4, iterations => 3);
INSERT INTO wals_models SELECT * FROM wals_models;
\echo :LAST_ERROR_SQLSTATE
UPDATE wals_models SET model = 'mine';
\echo :LAST_ERROR_SQLSTATE
DELETE FROM wals_training_log;
\echo :LAST_ERROR_SQLSTATE
SELECT nextval('wals_model_version_seq');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM wals_serving_images;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM wals_serving_images;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- the trainer's training wrote the image of its served items, as wals
SELECT count(*) > 1 AS image_chunks,
       bool_and(version = (SELECT version FROM wals_models WHERE model = 'Shop Model')) AS of_its_version
FROM wals_serving_images WHERE item_table = '"Shop"."Shop Model_item_factors"'::regclass;
SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'Shop' ORDER BY tablename;
SELECT schema, model, source, user_factors, item_factors, trained_by FROM wals_models;

-- every serving function with these names, as the trainer
SET ROLE wals_trainer;
SELECT count(*) AS recommend FROM wals_recommend(1, 3, 'Shop.Shop Model');
SELECT count(*) AS batch FROM wals_recommend_batch('{1,2}', 3, 'Shop.Shop Model');
SELECT count(*) AS fold_in FROM wals_recommend_items('{1,2}', NULL, 3, 'Shop.Shop Model');
SELECT count(*) AS similar FROM wals_similar_items(1, 3, 'Shop.Shop Model');
SELECT count(*) > 0 AS explain FROM wals_explain(1, (SELECT item_id FROM wals_recommend(1, 1, 'Shop.Shop Model')), 'Shop.Shop Model');
-- (against its own training rows: every test item is a training item)
SELECT value AS test_items_in_training FROM wals_evaluate('Shop.Shop Model', '"Shop"."Item Views"', 'User Id', 'Item"Id', 'Times', 3)
WHERE metric = 'items_in_training';
SELECT wals_refresh_users('{1}', '"Shop"."Shop Model"') AS refreshed;
-- an unqualified name is looked up along search_path
SET search_path = "Shop", public;
SELECT count(*) AS by_search_path FROM wals_recommend(1, 3, 'Shop Model');
RESET search_path;
SELECT count(*) FROM wals_recommend(1, 3, 'Shop Model');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- a serving role needs USAGE on the schema and SELECT on the factor tables
SET ROLE wals_app;
SELECT count(*) FROM wals_recommend(1, 3, 'Shop.Shop Model', exclude_rated => false);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT USAGE ON SCHEMA "Shop" TO wals_app;
SET ROLE wals_app;
SELECT count(*) FROM wals_recommend(1, 3, 'Shop.Shop Model', exclude_rated => false);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT SELECT ON "Shop"."Shop Model_user_factors", "Shop"."Shop Model_item_factors" TO wals_app;
SET ROLE wals_app;
SELECT count(*) AS served FROM wals_recommend(1, 3, 'Shop.Shop Model', exclude_rated => false);
-- ... and nothing on the source: the model keeps each user's rated items
SELECT count(*) AS served_excluding_rated FROM wals_recommend(1, 3, 'Shop.Shop Model');
SELECT count(*) AS rated_recommended FROM wals_recommend(1, 30, 'Shop.Shop Model') r
WHERE r.item_id IN (SELECT item_id FROM wals_rated_items(1, 'Shop.Shop Model'));
-- it cannot retrain, refresh or drop the trainer's model, even from a
-- source of its own
CREATE TABLE app.views AS SELECT * FROM generate_series(1, 3) u, generate_series(1, 4) i;
SELECT model FROM wals_train('app.views', 'u', 'i', model => 'Shop.Shop Model', factors => 4,
    iterations => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT wals_refresh_users('{1}', 'Shop.Shop Model');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_drop_model('Shop.Shop Model');
\echo :LAST_ERROR_SQLSTATE
-- but a model of the same name in its own schema is its own
SET search_path = app, public;
SELECT model FROM wals_train('app.views', 'u', 'i', model => 'Shop Model', factors => 2, iterations => 1);
SELECT schema, model FROM wals_models ORDER BY 1, 2;
SELECT count(*) AS its_own FROM wals_recommend(1, 3, 'Shop Model', exclude_rated => false);
RESET search_path;
RESET ROLE;
SELECT count(*) AS still_there FROM wals_models WHERE model = 'Shop Model';

-- a superuser retraining a role's model leaves it with that role
SELECT model FROM wals_train('"Shop"."Item Views"', 'User Id', 'Item"Id', 'Times',
    model => 'Shop.Shop Model', factors => 4, iterations => 2);
SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'Shop' ORDER BY tablename;
GRANT SELECT ON "Shop"."Shop Model_user_factors", "Shop"."Shop Model_item_factors" TO wals_app;

-- item factors this backend cached for one role are not served to a role
-- that may no longer read them
SELECT count(*) AS cached FROM wals_recommend(1, 3, 'Shop.Shop Model');
REVOKE SELECT ON "Shop"."Shop Model_item_factors" FROM wals_app;
SET ROLE wals_app;
SELECT count(*) FROM wals_recommend(1, 3, 'Shop.Shop Model');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_predict(1, 1, 'Shop.Shop Model');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- row-level security on the item factors: wals reads them as the model's
-- owner, so a role that the policies would filter is refused rather than
-- served the rows they hide, even from a backend that cached the model
-- for the owner
GRANT SELECT ON "Shop"."Shop Model_item_factors" TO wals_app;
ALTER TABLE "Shop"."Shop Model_item_factors" ENABLE ROW LEVEL SECURITY;
CREATE POLICY few_items ON "Shop"."Shop Model_item_factors" FOR SELECT TO wals_app USING (item_id <= 5);
SELECT count(*) AS owner_sees FROM wals_recommend(1, 30, 'Shop.Shop Model', exclude_rated => false);
SET ROLE wals_app;
SELECT count(*) AS app_sees, max(item_id) <= 5 AS only_its_items
FROM wals_recommend(1, 30, 'Shop.Shop Model', exclude_rated => false);
RESET ROLE;
SELECT count(*) AS owner_sees_again FROM wals_recommend(1, 30, 'Shop.Shop Model', exclude_rated => false);
-- forced on the owner, a policy runs as the owner for every role served,
-- a superuser included; the cached items follow the table's definition
CREATE POLICY owner_few ON "Shop"."Shop Model_item_factors" FOR SELECT TO wals_trainer
  USING (item_id <= 7);
ALTER TABLE "Shop"."Shop Model_item_factors" FORCE ROW LEVEL SECURITY;
SELECT count(*) AS superuser_sees, max(item_id) <= 7 AS only_owner_items
FROM wals_recommend(1, 30, 'Shop.Shop Model', exclude_rated => false);
ALTER TABLE "Shop"."Shop Model_item_factors" NO FORCE ROW LEVEL SECURITY;
SELECT count(*) AS superuser_sees_again
FROM wals_recommend(1, 30, 'Shop.Shop Model', exclude_rated => false);
DROP POLICY owner_few ON "Shop"."Shop Model_item_factors";

-- a user's row is read through the user table's primary key, unless row
-- security applies to the owner: then by a query that runs the owner's
-- policies, for every role served; the choice follows the table's
-- definition
CREATE POLICY owner_users ON "Shop"."Shop Model_user_factors" FOR SELECT TO wals_trainer
  USING (user_id <> 1);
ALTER TABLE "Shop"."Shop Model_user_factors" ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
SELECT count(*) AS user_1_hidden FROM wals_recommend(1, 3, 'Shop.Shop Model');
SELECT count(*) AS user_2_seen FROM wals_recommend(2, 3, 'Shop.Shop Model');
ALTER TABLE "Shop"."Shop Model_user_factors" NO FORCE ROW LEVEL SECURITY,
  DISABLE ROW LEVEL SECURITY;
DROP POLICY owner_users ON "Shop"."Shop Model_user_factors";
SELECT count(*) AS user_1_again FROM wals_recommend(1, 3, 'Shop.Shop Model');

-- the catalog is read in place, with the right to read it that a query
-- would need; row security on it, which only a query could apply, is
-- refused
REVOKE SELECT ON wals_models FROM PUBLIC;
SET ROLE wals_app;
SELECT wals_predict(1, 1, 'Shop.Shop Model');
RESET ROLE;
GRANT SELECT ON wals_models TO PUBLIC;
ALTER TABLE wals_models ENABLE ROW LEVEL SECURITY;
SET ROLE wals_app;
SELECT wals_predict(1, 1, 'Shop.Shop Model');
RESET ROLE;
ALTER TABLE wals_models DISABLE ROW LEVEL SECURITY;

-- row-level security on the source: a training sees only the caller's rows
ALTER TABLE "Shop"."Item Views" ENABLE ROW LEVEL SECURITY;
CREATE POLICY first_fifty ON "Shop"."Item Views" FOR SELECT TO wals_app USING ("User Id" <= 50);
GRANT SELECT ON "Shop"."Item Views" TO wals_app;
SET ROLE wals_app;
SELECT model, users FROM wals_train('"Shop"."Item Views"', 'User Id', 'Item"Id', 'Times',
    model => 'app.App Model', factors => 4, iterations => 2);
RESET ROLE;

-- errors that say what to do.  A role's first training with an unqualified
-- model goes to the first schema of search_path, public, where it may not
-- create tables: the hint names the source's schema where it may, else
-- asks for one
SET ROLE wals_app;
SELECT model FROM wals_train('app.views', 'u', 'i', factors => 2, iterations => 1);
SELECT model FROM wals_train('"Shop"."Item Views"', 'User Id', 'Item"Id', factors => 2,
    iterations => 1);
-- a model in a schema on search_path that the role may not use is refused
-- for that schema, not reported missing, whether named or the only one
RESET ROLE;
REVOKE USAGE ON SCHEMA "Shop" FROM wals_app;
SET ROLE wals_app;
SET search_path = "Shop", public;
SELECT count(*) FROM wals_recommend(1, 3, 'Shop Model');
SELECT count(*) FROM wals_recommend(1, 3);
SELECT wals_drop_model('Shop Model');
-- a model it may not read says who grants what
SELECT count(*) FROM wals_recommend(1, 3, 'Shop.Shop Model');
RESET ROLE;
GRANT USAGE ON SCHEMA "Shop" TO wals_app;
REVOKE SELECT ON "Shop"."Shop Model_user_factors" FROM wals_app;
SET ROLE wals_app;
SELECT count(*) FROM wals_recommend(1, 3, 'Shop Model');
RESET search_path;
RESET ROLE;
-- a retraining creates the tables as the model's owner, who needs CREATE
REVOKE CREATE ON SCHEMA "Shop" FROM wals_trainer;
SELECT model FROM wals_train('"Shop"."Item Views"', 'User Id', 'Item"Id', 'Times',
    model => 'Shop.Shop Model', factors => 4, iterations => 1);
GRANT CREATE ON SCHEMA "Shop" TO wals_trainer;

SELECT wals_drop_model('Shop.Shop Model'), wals_drop_model('app.App Model'),
       wals_drop_model('app.Shop Model');
DROP SCHEMA "Shop" CASCADE;
DROP SCHEMA app CASCADE;
DROP ROLE wals_trainer, wals_app;
