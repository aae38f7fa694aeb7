
# What the upgrade tests (008_upgrade.pl, 021_pg_upgrade.pl) make alike: a
# model written as wals 0.1.0 wrote one.
package UpgradeTest;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';

our @EXPORT = qw(v010_model_sql);

# The SQL whose rows are the SQL that writes model $schema.$model of this
# version as wals 0.1.0 wrote a model named m: the rows of its factor
# tables m_user_factors and m_item_factors (made by the caller), and its
# catalog row, naming $source (schema-qualified) and its column $rating.
sub v010_model_sql
{
	my ($schema, $model, $source, $rating) = @_;
	return qq{
SELECT string_agg(format('INSERT INTO m_user_factors VALUES (%s, %L);', user_id, factors), E'\\n')
FROM $schema.${model}_user_factors;
SELECT string_agg(format('INSERT INTO m_item_factors VALUES (%s, %L);', item_id, factors), E'\\n')
FROM $schema.${model}_item_factors;
SELECT format('INSERT INTO wals_models VALUES (''m'', ''$source'', ''user_id'', ''item_id'','
              ' ''$rating'', %L, %s, %s, %s, %s, %s, %s, %L, %s, %s, NULL, false, %s, %s, %s, %s,'
              ' ''cpu'', 0, 0, 0, 0, 0, now(), current_user, nextval(''wals_model_version_seq''),'
              ' ''public'', ''m_user_factors'', ''m_item_factors'');',
              feedback, factors, iterations, max_iterations, regularization, alpha,
              unobserved_weight, solver, cg_steps, seed, users, items, ratings, loss)
FROM wals_models WHERE schema = '$schema' AND model = '$model';
};
}

1;
