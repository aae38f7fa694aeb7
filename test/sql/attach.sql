-- wals_attach_model: factor tables there without their catalog row, as a
-- dump of their schema alone (pg_dump -n) restores them, made a model again
-- from the description every training writes on them; and its errors.
SET client_min_messages = warning;
CREATE SCHEMA att;
CREATE TABLE att.plays AS
SELECT u AS user_id, (u * 7 + g * 13) % 40 + 1 AS item_id, (1 + (u + g) % 3)::real AS n
FROM generate_series(1, 100) u, generate_series(1, 5) g;
SELECT model FROM wals_train('att.plays', 'user_id', 'item_id', 'n', model => 'att.m',
    factors => 4, iterations => 3, feedback => 'explicit', regularization => 0.05,
    solver => 'cholesky', seed => 3);

-- the description on column "factors" of the user factor table
SELECT left(col_description('att.m_user_factors'::regclass, 2), 21) AS prefix;
SELECT d->>'format' AS format, d->>'source' AS source, d->>'rating_col' AS rating_col,
       d->>'feedback' AS feedback, d->>'factors' AS factors, d->>'regularization' AS regularization,
       d->>'solver' AS solver, d->>'seed' AS seed, d->'block_size' AS block_size
FROM (SELECT substr(col_description('att.m_user_factors'::regclass, 2), 22)::jsonb AS d) s;

CREATE TEMP TABLE served AS SELECT * FROM wals_recommend(1, 5, 'att.m');
CREATE TEMP TABLE settings AS
SELECT source, user_col, item_col, rating_col, feedback, factors, iterations, max_iterations,
       regularization, alpha, unobserved_weight, solver, cg_steps, seed, tolerance, warm_start,
       users, items, ratings, loss, device, workers, load_s, train_s, store_s, total_s,
       user_factors, item_factors, owner, accelerate, block_size, regularization_exponent,
       init_std, validation, validation_table, validation_metric, patience, best_iteration,
       validation_score, trained_at
FROM wals_models WHERE schema = 'att' AND model = 'm';

-- the catalog row gone, as a restore of a dump of schema att alone leaves it:
-- each call that names the model says how to attach it
DELETE FROM wals_training_log WHERE schema = 'att' AND model = 'm';
DELETE FROM wals_models WHERE schema = 'att' AND model = 'm';
SELECT * FROM wals_recommend(1, 5, 'att.m');
SET search_path = att, public;
SELECT * FROM wals_recommend(1, 5, 'm');
SELECT * FROM wals_recommend(1, 5);
RESET search_path;
SELECT model FROM wals_train('att.plays', 'user_id', 'item_id', 'n', model => 'att.m',
    factors => 4, iterations => 1, feedback => 'explicit', warm_start => true);

SET client_min_messages = notice;
SELECT wals_attach_model('att.m');
SET client_min_messages = warning;
-- the same settings and tables, the same recommendations
SELECT count(*) AS differences FROM (
    (SELECT * FROM settings
     EXCEPT SELECT source, user_col, item_col, rating_col, feedback, factors, iterations,
       max_iterations, regularization, alpha, unobserved_weight, solver, cg_steps, seed,
       tolerance, warm_start, users, items, ratings, loss, device, workers, load_s, train_s,
       store_s, total_s, user_factors, item_factors, owner, accelerate, block_size,
       regularization_exponent, init_std, validation, validation_table, validation_metric,
       patience, best_iteration, validation_score, trained_at
     FROM wals_models WHERE schema = 'att' AND model = 'm')) d;
SELECT (SELECT array_agg(item_id ORDER BY item_id) FROM served) =
       (SELECT array_agg(item_id ORDER BY item_id) FROM wals_recommend(1, 5, 'att.m')) AS same;
SELECT count(*) AS log_rows FROM wals_training_log WHERE schema = 'att' AND model = 'm';

-- a validation table, which the description names schema-qualified
CREATE TABLE att.held AS SELECT u AS user_id, (u * 7 + 6 * 13) % 40 + 1 AS item_id FROM generate_series(1, 100) u;
SELECT model FROM wals_train('att.plays', 'user_id', 'item_id', 'n', model => 'att.v',
    factors => 4, iterations => 2, validation_table => 'att.held', patience => 5);
CREATE TEMP TABLE v_described AS
SELECT substr(col_description('att.v_user_factors'::regclass, 2), 22)::jsonb AS d;
SELECT d->>'format' AS format, d->>'validation_table' AS validation_table FROM v_described;
CREATE FUNCTION pg_temp.describe_v(d jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM wals_models WHERE schema = 'att' AND model = 'v';
  EXECUTE format('COMMENT ON COLUMN att.v_user_factors.factors IS %L',
                 'wals model settings: ' || d::text);
END$$;
SELECT pg_temp.describe_v(d) FROM v_described;
SELECT wals_attach_model('att.v');
SELECT validation_table, validation_owner = current_user::regrole AS owner_recorded,
       validation_metric, patience
FROM wals_models WHERE schema = 'att' AND model = 'v';
-- 0.4.0 and 0.5.0 (format 1) named it alone: it is looked for in the
-- model's schema, then in its source's, among the relations of the
-- model's owner or of the source's owner
SELECT pg_temp.describe_v(d || '{"format": 1, "validation_table": "held"}') FROM v_described;
SELECT wals_attach_model('att.v');
SELECT validation_table, validation_owner = current_user::regrole AS owner_recorded
FROM wals_models WHERE schema = 'att' AND model = 'v';
-- not found, or of another role: the model is attached without it, keeps
-- its metric, and a retraining asks for one
CREATE ROLE wals_att_other;
CREATE TABLE att.planted (user_id int, item_id int);
ALTER TABLE att.planted OWNER TO wals_att_other;
SET client_min_messages = notice;
SELECT pg_temp.describe_v(d || '{"format": 1, "validation_table": "planted"}') FROM v_described;
SELECT wals_attach_model('att.v');
SELECT pg_temp.describe_v(d || '{"validation_table": "att.gone"}') FROM v_described;
SELECT wals_attach_model('att.v');
SET client_min_messages = warning;
SELECT validation_table, validation_owner, validation_metric, patience
FROM wals_models WHERE schema = 'att' AND model = 'v';
SELECT * FROM wals_retrain('att.v');
SELECT model FROM wals_retrain('att.v', validation_table => 'att.held');
SELECT validation_table FROM wals_models WHERE schema = 'att' AND model = 'v';
SELECT wals_drop_model('att.v');
DROP TABLE att.held, att.planted;
DROP ROLE wals_att_other;

-- errors
SELECT wals_attach_model(NULL);
SELECT wals_attach_model('att.m');
SELECT wals_attach_model('att.none');
SELECT wals_attach_model('nowhere.m');
SELECT wals_attach_model('pg_temp.m');
SELECT wals_attach_model('a.b.c');
-- the tables of a model trained before the description, or whose comment
-- its owner replaced: there is nothing to attach from
DELETE FROM wals_models WHERE schema = 'att' AND model = 'm';
COMMENT ON COLUMN att.m_user_factors.factors IS NULL;
SELECT wals_attach_model('att.m');
COMMENT ON COLUMN att.m_user_factors.factors IS 'the factors of the plays';
SELECT wals_attach_model('att.m');
-- a description cut short
COMMENT ON COLUMN att.m_user_factors.factors IS 'wals model settings: {"format": 1}';
SELECT wals_attach_model('att.m');
-- a retraining leaves a comment of the owner's own as it is
DROP TABLE att.m_user_factors, att.m_item_factors;
SELECT model FROM wals_train('att.plays', 'user_id', 'item_id', 'n', model => 'att.m',
    factors => 4, iterations => 1);
COMMENT ON COLUMN att.m_user_factors.factors IS 'the factors of the plays';
SELECT model FROM wals_train('att.plays', 'user_id', 'item_id', 'n', model => 'att.m',
    factors => 4, iterations => 1);
SELECT col_description('att.m_user_factors'::regclass, 2) AS kept;

SELECT wals_drop_model('att.m');
DROP SCHEMA att CASCADE;
