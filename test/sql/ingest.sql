-- Reading the ratings: plain tables are scanned directly and everything else
-- through SPI, and either way a training sees exactly the rows that
-- "SELECT user_col, item_col, rating_col FROM source" would show its caller.
SET client_min_messages = warning;
CREATE TEMP TABLE models_before AS SELECT model FROM wals_models;

-- the number of factor rows two models disagree on (0: the same model)
CREATE FUNCTION factors_differ(a text, b text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM ('
                   '(SELECT * FROM %1$I EXCEPT ALL SELECT * FROM %2$I) UNION ALL '
                   '(SELECT * FROM %2$I EXCEPT ALL SELECT * FROM %1$I)) d',
                   a || '_user_factors', b || '_user_factors')
    INTO n;
    EXECUTE format('SELECT %3$s + count(*) FROM ('
                   '(SELECT * FROM %1$I EXCEPT ALL SELECT * FROM %2$I) UNION ALL '
                   '(SELECT * FROM %2$I EXCEPT ALL SELECT * FROM %1$I)) d',
                   a || '_item_factors', b || '_item_factors', n)
    INTO n;
    RETURN n;
END
$$;

CREATE TABLE plain AS
SELECT u AS user_id, (u * 7 + g) % 30 + 1 AS item_id, (1 + (u + g) % 5)::real AS rating
FROM generate_series(1, 100) u, generate_series(1, 10) g;

-- a plain table: read directly
SELECT model, users, items, ratings
FROM wals_train('plain', 'user_id', 'item_id', 'rating', model => 'p_direct',
                factors => 4, iterations => 3);

-- the same rows through a view (SPI) and in another physical order give the
-- same model, factor for factor
CREATE VIEW plain_view AS SELECT * FROM plain;
SELECT model, users, items, ratings
FROM wals_train('plain_view', 'user_id', 'item_id', 'rating', model => 'p_view',
                factors => 4, iterations => 3);
SELECT factors_differ('p_direct', 'p_view');
CREATE TABLE shuffled AS SELECT * FROM plain ORDER BY md5(user_id || '/' || item_id);
SELECT model, ratings
FROM wals_train('shuffled', 'user_id', 'item_id', 'rating', model => 'p_shuffled',
                factors => 4, iterations => 3);
SELECT factors_differ('p_direct', 'p_shuffled');

-- the caller's snapshot: rows deleted earlier in the transaction are gone
BEGIN;
DELETE FROM plain WHERE user_id > 90;
SELECT model, users, ratings
FROM wals_train('plain', 'user_id', 'item_id', 'rating', model => 'p_deleted', factors => 2,
                iterations => 1);
ROLLBACK;

-- every accepted column type, read directly, gives the model of its float8 copy
CREATE DOMAIN item_code AS int4 CHECK (VALUE > 0);
CREATE TABLE typed AS
SELECT user_id::int2 AS u2, user_id::int4 AS u4, item_id::item_code AS i4,
       rating::int2 AS r2, rating::int4 AS r4, rating::int8 AS r8,
       rating::real AS r_real, rating::float8 AS r_float8, rating::numeric AS r_numeric
FROM plain;
SELECT model, users, items, ratings
FROM wals_train('typed', 'u2', 'i4', 'r_float8', model => 't_ref',
                factors => 4, iterations => 3);
SELECT r.col, t.users, t.ratings, factors_differ('t_ref', t.model) AS differ
FROM (VALUES ('r2'), ('r4'), ('r8'), ('r_real'), ('r_numeric')) r(col),
     LATERAL wals_train('typed', 'u4', 'i4', r.col, model => 't_' || r.col,
                        factors => 4, iterations => 3) t;

-- numeric ratings are converted as ::float8 would: a fraction, a huge value
CREATE TABLE numeric_ratings (user_id int, item_id int, rating numeric);
INSERT INTO numeric_ratings VALUES (1, 1, 0.1), (2, 1, 2.5), (2, 2, 1e-30);
SELECT model, users, items, ratings
FROM wals_train('numeric_ratings', 'user_id', 'item_id', 'rating', factors => 2,
                iterations => 1);
INSERT INTO numeric_ratings VALUES (3, 3, 1e300);
SELECT * FROM wals_train('numeric_ratings', 'user_id', 'item_id', 'rating', factors => 2);
INSERT INTO numeric_ratings VALUES (3, 3, 'NaN');
DELETE FROM numeric_ratings WHERE rating = 1e300;
SELECT * FROM wals_train('numeric_ratings', 'user_id', 'item_id', 'rating', factors => 2);

-- no rating column: every pair counts 1
SELECT model, users, items, ratings
FROM wals_train('plain', 'user_id', 'item_id', NULL, model => 'p_ones', factors => 2,
                iterations => 1);

-- dropped columns around the ones used, and a rating column added later with
-- a default that the older rows only have as a missing value
CREATE TABLE dropped (junk text, user_id int, gone int, item_id int);
INSERT INTO dropped SELECT 'x', user_id, 0, item_id FROM plain;
ALTER TABLE dropped DROP COLUMN junk, DROP COLUMN gone;
ALTER TABLE dropped ADD COLUMN rating real DEFAULT 2;
UPDATE dropped d SET rating = p.rating FROM plain p
WHERE d.user_id = p.user_id AND d.item_id = p.item_id AND d.user_id > 50;
UPDATE plain SET rating = 2 WHERE user_id <= 50;
SELECT model, users, items, ratings
FROM wals_train('dropped', 'user_id', 'item_id', 'rating', model => 'd_direct',
                factors => 4, iterations => 3);
SELECT model, ratings
FROM wals_train('plain', 'user_id', 'item_id', 'rating', model => 'd_ref',
                factors => 4, iterations => 3);
SELECT factors_differ('d_direct', 'd_ref');

-- duplicate pairs merge: summed for implicit, averaged for explicit, as a
-- table already aggregated would give
CREATE TABLE dups AS SELECT * FROM plain UNION ALL SELECT * FROM plain WHERE user_id % 3 = 0
    UNION ALL SELECT user_id, item_id, 4 FROM plain WHERE user_id % 5 = 0;
CREATE TABLE dups_sum AS SELECT user_id, item_id, sum(rating) AS rating FROM dups GROUP BY 1, 2;
CREATE TABLE dups_avg AS SELECT user_id, item_id, avg(rating) AS rating FROM dups GROUP BY 1, 2;
SELECT (SELECT count(*) FROM dups) AS rows, model, users, items, ratings
FROM wals_train('dups', 'user_id', 'item_id', 'rating', model => 'dup_implicit',
                factors => 4, iterations => 3);
SELECT model, ratings
FROM wals_train('dups_sum', 'user_id', 'item_id', 'rating', model => 'dup_sum',
                factors => 4, iterations => 3);
SELECT factors_differ('dup_implicit', 'dup_sum');
SELECT model, ratings
FROM wals_train('dups', 'user_id', 'item_id', 'rating', model => 'dup_explicit',
                feedback => 'explicit', factors => 4, iterations => 3);
SELECT model, ratings
FROM wals_train('dups_avg', 'user_id', 'item_id', 'rating', model => 'dup_avg',
                feedback => 'explicit', factors => 4, iterations => 3);
SELECT factors_differ('dup_explicit', 'dup_avg');

-- Ratings of 256 distinct values or fewer take one-byte codes in the
-- training's matrices.  Here about 200 do, but each repeated pair sums to a
-- new value, more of them than codes are left for: the training gives the
-- codes up, merges again in floats, and trains what the merged table trains
-- (t/004_parallel.pl reads in the log which way each training took).
CREATE TABLE many_sums AS
    SELECT u AS user_id, i AS item_id, ((u * 7 + i) % 200 + 1)::real AS rating
    FROM generate_series(1, 40) u, generate_series(1, 30) i;
INSERT INTO many_sums SELECT user_id, item_id, 1000 FROM many_sums WHERE user_id % 2 = 0;
CREATE TABLE many_sums_merged AS
    SELECT user_id, item_id, sum(rating) AS rating FROM many_sums GROUP BY 1, 2;
SELECT (SELECT count(DISTINCT rating) FROM many_sums) AS read,
       (SELECT count(DISTINCT rating) FROM many_sums_merged) AS merged;
SELECT model, ratings
FROM wals_train('many_sums', 'user_id', 'item_id', 'rating', model => 'sums_read',
                factors => 4, iterations => 3);
SELECT model, ratings
FROM wals_train('many_sums_merged', 'user_id', 'item_id', 'rating', model => 'sums_merged',
                factors => 4, iterations => 3);
SELECT factors_differ('sums_read', 'sums_merged');
SELECT count(*) AS rated, count(*) FILTER (WHERE r.rating = m.rating) AS as_merged
FROM wals_rated_items(4, model => 'sums_read') r
JOIN many_sums_merged m ON m.user_id = 4 AND m.item_id = r.item_id;

-- implicit duplicates whose sum leaves the range of real
CREATE TABLE overflow (user_id int, item_id int, rating real);
INSERT INTO overflow VALUES (1, 1, 3e38), (1, 1, 3e38), (2, 2, 1);
SELECT * FROM wals_train('overflow', 'user_id', 'item_id', 'rating');

-- rows with a null id are skipped and counted, on both paths
CREATE TABLE null_ids (user_id bigint, item_id bigint, rating real);
INSERT INTO null_ids SELECT * FROM plain;
INSERT INTO null_ids VALUES (NULL, 1, 1), (1, NULL, 1), (NULL, NULL, NULL);
SELECT model, users, items, ratings
FROM wals_train('null_ids', 'user_id', 'item_id', 'rating', factors => 2, iterations => 1);
CREATE TABLE only_nulls (user_id int, item_id int, rating real);
INSERT INTO only_nulls VALUES (NULL, 1, 1), (2, NULL, 1);
CREATE VIEW only_nulls_view AS SELECT * FROM only_nulls;
SET client_min_messages = notice;
SELECT * FROM wals_train('only_nulls', 'user_id', 'item_id', 'rating');
SELECT * FROM wals_train('only_nulls_view', 'user_id', 'item_id', 'rating');
SET client_min_messages = warning;

-- inheritance: the children's rows count, as in a SELECT from the parent
CREATE TABLE parent (user_id int, item_id int, rating real);
CREATE TABLE child_a () INHERITS (parent);
CREATE TABLE child_b (extra text) INHERITS (parent);
INSERT INTO parent SELECT * FROM plain WHERE user_id <= 20;
INSERT INTO child_a SELECT * FROM plain WHERE user_id > 20 AND user_id <= 60;
INSERT INTO child_b SELECT *, 'b' FROM plain WHERE user_id > 60;
SELECT model, users, items, ratings
FROM wals_train('parent', 'user_id', 'item_id', 'rating', model => 'inherited',
                factors => 4, iterations => 3);
SELECT factors_differ('inherited', 'd_ref');
SELECT model, users, ratings
FROM wals_train('child_a', 'user_id', 'item_id', 'rating', factors => 2, iterations => 1);

-- a partitioned table, read through SPI
CREATE TABLE parted (user_id int, item_id int, rating real) PARTITION BY RANGE (user_id);
CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (1) TO (50);
CREATE TABLE parted_high PARTITION OF parted FOR VALUES FROM (50) TO (MAXVALUE);
INSERT INTO parted SELECT * FROM plain;
SELECT model, users, items, ratings
FROM wals_train('parted', 'user_id', 'item_id', 'rating', model => 'parted',
                factors => 4, iterations => 3);
SELECT factors_differ('parted', 'd_ref');
SELECT model, users, ratings
FROM wals_train('parted_high', 'user_id', 'item_id', 'rating', factors => 2, iterations => 1);

-- materialized views: read directly once populated; before, PostgreSQL's error
CREATE MATERIALIZED VIEW plain_mv AS SELECT * FROM plain;
SELECT model, users, items, ratings
FROM wals_train('plain_mv', 'user_id', 'item_id', 'rating', factors => 2, iterations => 1);
CREATE MATERIALIZED VIEW empty_mv AS SELECT * FROM plain WITH NO DATA;
SELECT * FROM wals_train('empty_mv', 'user_id', 'item_id', 'rating');

-- row-level security and privileges: a role trains on what it may SELECT
CREATE SCHEMA guarded;
CREATE ROLE wals_ingest_user;
GRANT USAGE, CREATE ON SCHEMA guarded TO wals_ingest_user;
CREATE TABLE guarded.rated AS SELECT * FROM plain;
ALTER TABLE guarded.rated ENABLE ROW LEVEL SECURITY;
CREATE POLICY first_half ON guarded.rated FOR SELECT USING (user_id <= 50);
GRANT SELECT ON guarded.rated TO wals_ingest_user;
CREATE TABLE guarded.columns AS SELECT *, 0 AS secret FROM plain;
GRANT SELECT (user_id, item_id) ON guarded.columns TO wals_ingest_user;
CREATE TABLE guarded.hidden AS SELECT * FROM plain;

-- the owner (a superuser) sees every row
SELECT model, users, ratings
FROM wals_train('guarded.rated', 'user_id', 'item_id', 'rating', model => 'rls_owner',
                factors => 2, iterations => 1);

SET ROLE wals_ingest_user;
-- (its models go to the first schema of its search_path, where it may create)
SET search_path = guarded, public;
SELECT model, users, ratings
FROM wals_train('guarded.rated', 'user_id', 'item_id', 'rating', model => 'rls_user',
                factors => 2, iterations => 1);
-- column privileges: the granted columns can be read, the others cannot
SELECT model, users, ratings
FROM wals_train('guarded.columns', 'user_id', 'item_id', NULL, model => 'col_user',
                factors => 2, iterations => 1);
SELECT * FROM wals_train('guarded.columns', 'user_id', 'item_id', 'rating');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('guarded.columns', 'user_id', 'item_id', 'secret');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM wals_train('guarded.hidden', 'user_id', 'item_id', 'rating');
\echo :LAST_ERROR_SQLSTATE
SELECT wals_drop_model('rls_user');
SELECT wals_drop_model('col_user');
RESET search_path;
RESET ROLE;
SELECT wals_drop_model('rls_owner');
DROP SCHEMA guarded CASCADE;
DROP ROLE wals_ingest_user;

-- wals.max_memory refuses a source while it is being read, once its ids
-- alone outgrow it (its rows would go to temporary files)
CREATE TABLE big AS
SELECT g AS user_id, g % 1000 AS item_id, 1::real AS rating FROM generate_series(1, 200000) g;
SET wals.max_memory = '1MB';
SELECT * FROM wals_train('big', 'user_id', 'item_id', 'rating');
\echo :LAST_ERROR_SQLSTATE
RESET wals.max_memory;

-- leave the database as it was found
SELECT count(wals_drop_model(model)) AS dropped
FROM wals_models WHERE model NOT IN (SELECT model FROM models_before);
DROP TABLE plain, shuffled, typed, numeric_ratings, dropped, dups, dups_sum, dups_avg,
    overflow, null_ids, only_nulls, parent, parted, big, many_sums, many_sums_merged CASCADE;
DROP DOMAIN item_code;
DROP FUNCTION factors_differ(text, text);
