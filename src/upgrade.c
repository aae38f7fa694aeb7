/*
 * upgrade.c
 *	  What the update to 0.3.0 does in C: give each model's user factor
 *	  table the rated items of its users.
 *
 * From 0.3.0 on, a model keeps each user's rated items beside the user's
 * factors, and serving never reads the source.  Models trained before get
 * the two columns here, filled from their source as it is now, merged as a
 * training merges ratings.  Like every other piece of work on a model's
 * relations, this runs as the model's owner in a security-restricted
 * operation (roles.c): the update runs as a superuser, and must not run a
 * tenant's view or trigger code with its rights.  The SQL function is
 * created by the update script, called for each model and dropped again.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "wals.h"

PG_FUNCTION_INFO_V1(wals_upgrade_keep_rated);

/* The merged rating of one (user, item) cell, as a training merges them. */
static char *
merged_rating(const WalsModelInfo *info)
{
	bool		implicit = info->params.feedback == WALS_IMPLICIT;

	if (info->rating_col == NULL)
		return implicit ? "pg_catalog.count(*)::pg_catalog.float4" : "1::pg_catalog.float4";
	return psprintf("pg_catalog.%s((%s)::pg_catalog.float8)::pg_catalog.float4",
					implicit ? "sum" : "avg", quote_identifier(info->rating_col));
}

/* Fill the rated items of every user of the model from its source. */
static void
fill_rated(const WalsModelInfo *info, const char *table)
{
	char	   *source;
	const char *user_col = quote_identifier(info->user_col);
	const char *item_col = quote_identifier(info->item_col);

	if (!OidIsValid(info->source) || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(info->source)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the source relation of model \"%s\" no longer exists", info->display)));
	source = wals_relation_name(info->source);
	wals_spi_exec(psprintf("UPDATE %s AS t SET rated_items = r.items, ratings = r.ratings"
						   " FROM (SELECT u, pg_catalog.array_agg(i ORDER BY i) AS items,"
						   " CASE WHEN pg_catalog.bool_and(v OPERATOR(pg_catalog.=) 1::pg_catalog.float4)"
						   " THEN NULL ELSE pg_catalog.array_agg(v ORDER BY i) END AS ratings"
						   " FROM (SELECT (%s)::pg_catalog.int8 AS u, (%s)::pg_catalog.int8 AS i, %s AS v"
						   " FROM %s WHERE %s IS NOT NULL AND %s IS NOT NULL GROUP BY 1, 2) c"
						   " GROUP BY u) r WHERE t.user_id OPERATOR(pg_catalog.=) r.u",
						   table, user_col, item_col, merged_rating(info), source,
						   user_col, item_col),
				  0, NULL, NULL, SPI_OK_UPDATE);
}

/*
 * wals_upgrade_keep_rated(schema name, model text, fill bool) RETURNS void
 *
 * Add the rated items and their ratings to the model's user factor table,
 * and fill them from its source when fill is true.
 */
Datum
wals_upgrade_keep_rated(PG_FUNCTION_ARGS)
{
	char	   *schema = NameStr(*PG_GETARG_NAME(0));
	char	   *model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	bool		fill = PG_GETARG_BOOL(2);
	WalsModelInfo info;
	WalsRoleSave save;
	char	   *table;

	SPI_connect();
	if (!wals_catalog_lookup(schema, model, &info))
		wals_no_such_model(schema, model);
	table = wals_relation_name(info.user_rel);
	wals_become(wals_model_owner(&info), &save);
	wals_spi_exec(psprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS rated_items pg_catalog.int8[]"
						   " NOT NULL DEFAULT '{}', ADD COLUMN IF NOT EXISTS ratings pg_catalog.float4[]",
						   table),
				  0, NULL, NULL, SPI_OK_UTILITY);
	wals_spi_exec(psprintf("ALTER TABLE %s ALTER COLUMN rated_items DROP DEFAULT", table),
				  0, NULL, NULL, SPI_OK_UTILITY);
	if (fill)
		fill_rated(&info, table);
	wals_unbecome(&save);
	SPI_finish();
	PG_RETURN_VOID();
}
