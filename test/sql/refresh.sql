-- wals_refresh_users: users solved again from their current ratings,
-- in place, without a training.
SET client_min_messages = warning;
CREATE TABLE fresh AS
SELECT u AS user_id, (u * 7 + g * 13) % 50 + 1 AS item_id, (1 + (u + g) % 4)::real AS r
FROM generate_series(1, 200) u, generate_series(1, 6) g;
CREATE INDEX ON fresh (user_id);
SELECT model FROM wals_train('fresh', 'user_id', 'item_id', 'r', factors => 6, iterations => 6,
    solver => 'cholesky');
CREATE TEMP TABLE before AS SELECT * FROM fresh_user_factors;
SELECT version AS v0 FROM wals_models WHERE model = 'fresh' \gset

-- user 5 rates more, user 1000 is new, user 7 loses every rating
INSERT INTO fresh VALUES (5, 1, 4), (5, 2, 4), (1000, 3, 2), (1000, 4, 1), (1000, 4, 1);
DELETE FROM fresh WHERE user_id = 7;
SET client_min_messages = notice;
SELECT wals_refresh_users('{5, 1000, 7, 5, 123456}', 'fresh') AS stored;
SET client_min_messages = warning;

-- the new and changed users have the factors fold-in gives from the same
-- ratings, so they get the same recommendations
SELECT count(*) AS rows_1000 FROM fresh_user_factors WHERE user_id = 1000;
SELECT (SELECT array_agg(item_id ORDER BY item_id) FROM wals_recommend(u, 5, 'fresh')) =
       (SELECT array_agg(item_id ORDER BY item_id) FROM wals_recommend_items(
            (SELECT array_agg(item_id) FROM fresh WHERE user_id = u),
            (SELECT array_agg(r) FROM fresh WHERE user_id = u), 5, 'fresh')) AS same_as_fold_in
FROM unnest('{5, 1000}'::int[]) u;
SELECT max(abs(wals_predict(1000, i, 'fresh') - s.score)) < 1e-5 AS same_scores
FROM wals_recommend_items('{3,4,4}', '{2,1,1}', 50, 'fresh', exclude_rated => false) s(i, score);
-- user 7 has no factors left; users not asked for are untouched
SELECT count(*) AS rows_7 FROM fresh_user_factors WHERE user_id = 7;
SELECT count(*) AS untouched_changed FROM fresh_user_factors f JOIN before b USING (user_id)
WHERE f.factors <> b.factors AND user_id <> 5;
SELECT count(*) AS changed_5 FROM fresh_user_factors f JOIN before b USING (user_id)
WHERE f.factors <> b.factors AND user_id = 5;
-- the refreshed rows keep the items the users rate now, ratings merged as a
-- training merges them, and serving leaves those out
SELECT u AS user_id, r.* FROM unnest('{5, 1000}'::int[]) u, wals_rated_items(u, 'fresh') r
ORDER BY 1, 2;
SELECT count(*) AS rated_recommended FROM wals_recommend(5, 50, 'fresh') WHERE item_id IN (1, 2);
SELECT count(*) AS rated_recommended_anyway
FROM wals_recommend(5, 50, 'fresh', exclude_rated => false) WHERE item_id IN (1, 2);
-- the model keeps its version: the item side did not change
SELECT version = :v0 AS same_version FROM wals_models WHERE model = 'fresh';
-- wals_models counts the users the model has factors for: above, one came
-- and one went; here one more comes, then goes
SELECT users, users = (SELECT count(*) FROM fresh_user_factors) AS counted
FROM wals_models WHERE model = 'fresh';
INSERT INTO fresh VALUES (1001, 5, 3);
SELECT wals_refresh_users('{1001}', 'fresh') AS stored;
SELECT users, users = (SELECT count(*) FROM fresh_user_factors) AS counted
FROM wals_models WHERE model = 'fresh';
DELETE FROM fresh WHERE user_id = 1001;
SELECT wals_refresh_users('{1001}', 'fresh') AS stored;
SELECT users, users = (SELECT count(*) FROM fresh_user_factors) AS counted
FROM wals_models WHERE model = 'fresh';

-- the only model is used when none is named; an empty array stores nothing
SELECT wals_refresh_users('{5}') AS stored, wals_refresh_users('{}') AS none;
-- errors
SELECT wals_refresh_users(NULL, 'fresh');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_refresh_users('{1,NULL}', 'fresh');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_refresh_users('{1}', 'missing');
\echo :LAST_ERROR_SQLSTATE
-- a role that may read the model but does not own it cannot refresh it
CREATE ROLE wals_refresh_reader;
GRANT SELECT ON fresh, fresh_user_factors, fresh_item_factors TO wals_refresh_reader;
SET ROLE wals_refresh_reader;
SELECT count(*) FROM wals_recommend(5, 3, 'fresh');
SELECT wals_refresh_users('{5}', 'fresh');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- a factor table the owner added to is written by statements, which fill
-- a new row's default and fire its triggers; one as wals made it is
-- written in place, and gives what the statements gave
ALTER TABLE fresh_user_factors ADD note text DEFAULT 'added';
CREATE TABLE fired (user_id bigint);
CREATE FUNCTION fired() RETURNS trigger LANGUAGE plpgsql
AS $$ BEGIN INSERT INTO public.fired VALUES (NEW.user_id); RETURN NEW; END $$;
CREATE TRIGGER fired AFTER INSERT OR UPDATE ON fresh_user_factors
FOR EACH ROW EXECUTE FUNCTION fired();
INSERT INTO fresh VALUES (1002, 5, 3), (1002, 6, 1);
SELECT wals_refresh_users('{5,1002}', 'fresh') AS stored;
SELECT user_id, note FROM fresh_user_factors WHERE user_id IN (5, 1002) ORDER BY 1;
SELECT user_id FROM fired ORDER BY 1;
CREATE TABLE by_statement AS SELECT factors FROM fresh_user_factors WHERE user_id = 5;
ALTER TABLE fresh_user_factors DROP note;
DROP TRIGGER fired ON fresh_user_factors;
SELECT wals_refresh_users('{5}', 'fresh') AS stored;
SELECT count(*) AS fired FROM fired;
SELECT f.factors = s.factors AS same_factors
FROM fresh_user_factors f, by_statement s WHERE f.user_id = 5;
DELETE FROM fresh WHERE user_id = 1002;
SELECT wals_refresh_users('{1002}', 'fresh') AS stored;
SELECT count(*) AS removed FROM fresh_user_factors WHERE user_id = 1002;
DROP TABLE by_statement, fired;
DROP FUNCTION fired();

SELECT wals_drop_model('fresh');
DROP TABLE fresh, before;
DROP ROLE wals_refresh_reader;
