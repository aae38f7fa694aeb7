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
 * tenant's view or trigger code with its rights.  The SQL functions are
 * created by the update script, called for each model and dropped again.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/builtins.h"

#include "wals_catalog.h"

PG_FUNCTION_INFO_V1(wals_upgrade_keep_rated);
PG_FUNCTION_INFO_V1(wals_upgrade_pack_rated);

/* The merged rating of one (user, item) cell, as a training merges them. */
static char *
merged_rating(const WalsModelInfo *info, const WalsSourceNames *src)
{
	bool		implicit = info->params.feedback == WALS_IMPLICIT;

	if (src->rating_col == NULL)
		return implicit ? "pg_catalog.count(*)::pg_catalog.float4" : "1::pg_catalog.float4";
	return psprintf("pg_catalog.%s((%s)::pg_catalog.float8)::pg_catalog.float4",
					implicit ? "sum" : "avg", src->rating_col);
}

/* Fill the rated items of every user of the model from its source. */
static void
fill_rated(const WalsModelInfo *info, const char *table)
{
	WalsSourceNames src;

	wals_model_source(info, &src);
	wals_sql_expect(wals_sql(psprintf("UPDATE %s AS t SET rated = %s.wals_upgrade_pack_rated(r.items, r.ratings)"
						   " FROM (SELECT u, pg_catalog.array_agg(i ORDER BY i) AS items,"
						   " pg_catalog.array_agg(v ORDER BY i) AS ratings"
						   " FROM (SELECT (%s)::pg_catalog.int8 AS u, (%s)::pg_catalog.int8 AS i, %s AS v"
						   " FROM %s WHERE %s IS NOT NULL AND %s IS NOT NULL GROUP BY 1, 2) c"
						   " GROUP BY u) r WHERE t.user_id OPERATOR(pg_catalog.=) r.u",
						   table, quote_identifier(get_namespace_name(wals_extension_schema())),
						   src.user_col, src.item_col, merged_rating(info, &src), src.relation,
						   src.user_col, src.item_col),
							 0, NULL, NULL, NULL, false, 0),
					SPI_OK_UPDATE, info->user_rel);
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

	wals_spi_connect();
	if (!wals_catalog_lookup(schema, model, &info))
		wals_no_such_model(schema, model);
	table = wals_relation_name(info.user_rel);
	wals_become_model_owner(&info, &save);
	/* '\x0000': no rated item */
	wals_spi_exec(psprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS rated pg_catalog.bytea"
						   " NOT NULL DEFAULT '\\x0000'", table),
				  0, NULL, NULL, SPI_OK_UTILITY);
	wals_spi_exec(psprintf("ALTER TABLE %s ALTER COLUMN rated DROP DEFAULT", table),
				  0, NULL, NULL, SPI_OK_UTILITY);
	if (fill)
		fill_rated(&info, table);
	wals_unbecome(&save);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * wals_upgrade_pack_rated(items bigint[], ratings real[]) RETURNS bytea
 *
 * The rated items column of a user from the user's distinct items, in
 * increasing order, and their ratings, as a training packs it.
 */
Datum
wals_upgrade_pack_rated(PG_FUNCTION_ARGS)
{
	ArrayType  *items = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *ratings = PG_GETARG_ARRAYTYPE_P(1);
	int			n = ArrayGetNItems(ARR_NDIM(items), ARR_DIMS(items));
	const int64 *ids = (const int64 *) ARR_DATA_PTR(items);
	int32	   *indices = palloc(sizeof(int32) * Max(n, 1));

	if (ARR_HASNULL(items) || ARR_HASNULL(ratings) || ARR_ELEMTYPE(items) != INT8OID ||
		ARR_ELEMTYPE(ratings) != FLOAT4OID ||
		ArrayGetNItems(ARR_NDIM(ratings), ARR_DIMS(ratings)) != n)
		elog(ERROR, "wals: the rated items of a user are not one rating per item");
	for (int i = 0; i < n; i++)
	{
		if (i > 0 && ids[i] <= ids[i - 1])
			elog(ERROR, "wals: the rated items of a user are not in increasing order");
		indices[i] = i;
	}
	PG_RETURN_BYTEA_P(wals_rated_bytea(ids, indices, (const float *) ARR_DATA_PTR(ratings), n));
}
