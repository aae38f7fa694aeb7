/*
 * images.c
 *	  The items area of a model's serving version kept in a table, so that
 *	  a standby, and a server after a restart, copy it instead of building
 *	  it again.  What an area holds is src/serve/items.c's; this file reads
 *	  and writes the table.
 *
 * A shared area (src/serve/items.c) is derived data and dies with the
 * server: its first reader on a standby, or after a restart, used to read
 * the item table and compute YᵀY and the index again, which takes as long
 * as a training's first call did before areas were shared (half a second
 * at 40,000 x 256).  The training that builds an area now also writes it,
 * in its own transaction, into wals_serving_images: chunk 0 is the area's
 * head, the next ones its bytes after it.  A refresh of items, which may
 * come every few minutes and change a few rows, writes what it changed
 * instead, as an image of its own that names the version it changed
 * (src/serve/item_images.c says how they are read), and the whole area
 * only once those add up to more than it.  The table is WAL-logged like
 * any other, so a standby has the image as soon as it has replayed the
 * training or the refresh, and the first reader there copies it into a
 * segment and publishes that, as the training did on the primary.
 *
 * The table is wals's alone (the extension's owner writes and reads it,
 * no other role may), so an image is trusted as the catalog is; a reader
 * still checks that its head names the version asked for and that its
 * layout is the one this library gives that many items, and refuses
 * anything else by building instead.  An item table keeps the image of
 * one version and the changes made since: writing a whole one deletes the
 * images of the table's other versions and those of tables that no longer
 * exist.
 */
#include "postgres.h"

#include "catalog/dependency.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "wals_catalog.h"

/*
 * Bytes of an area per row after its head: TOAST writes and reads a row
 * without checking for a cancel, so a row is a few milliseconds of it.
 */
#define WALS_IMAGE_CHUNK	(1024 * 1024)

/*
 * Whether the extension has the table, as its own member: a catalog not
 * yet updated from 0.6.0 has none, and a relation of that name that wals
 * did not make is never read or written as the extension's owner.
 */
static bool
have_images(void)
{
	Oid			relid = get_relname_relid("wals_serving_images", wals_extension_schema());

	return OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_RELATION &&
		getExtensionOfObject(RelationRelationId, relid) == get_extension_oid("wals", false);
}

/*
 * Delete the images of item_rel and those of item tables that no longer
 * exist, as the catalog writer.
 */
static void
forget(Oid item_rel)
{
	Oid			type = OIDOID;
	Datum		value = ObjectIdGetDatum(item_rel);

	wals_spi_exec(psprintf("DELETE FROM %s i WHERE i.item_table OPERATOR(pg_catalog.=) $1"
						   " OR NOT EXISTS (SELECT FROM pg_catalog.pg_class c"
						   " WHERE c.oid OPERATOR(pg_catalog.=) i.item_table)",
						   wals_catalog_table("wals_serving_images")),
				  1, &type, &value, SPI_OK_DELETE);
}

/*
 * Delete the images of item_rel: the model is dropped, or its new version
 * is not shared, so that no reader takes the image of the version before.
 */
void
wals_image_forget(Oid item_rel)
{
	WalsRoleSave save;

	if (!have_images())
		return;
	wals_become_catalog_writer(&save);
	forget(item_rel);
	wals_unbecome(&save);
}

/*
 * Write the area (bytes long, its head head_bytes) as the image of
 * version of item_rel: in place of the table's others where replace, else
 * beside them (a refresh's changes, read with the images they change).
 * Runs in the transaction that made the version.
 */
void
wals_image_write(Oid item_rel, int64 version, const void *area, Size head_bytes, Size bytes,
				 bool replace)
{
	Oid			types[4] = {OIDOID, INT8OID, INT4OID, BYTEAOID};
	Datum		values[4];
	const char *base = (const char *) area;
	char	   *insert;
	WalsRoleSave save;
	int32		chunk = 0;

	if (!have_images())
		return;
	values[0] = ObjectIdGetDatum(item_rel);
	values[1] = Int64GetDatum(version);
	wals_become_catalog_writer(&save);
	if (replace)
		forget(item_rel);
	insert = psprintf("INSERT INTO %s (item_table, version, chunk, data) VALUES ($1, $2, $3, $4)",
					  wals_catalog_table("wals_serving_images"));
	for (Size at = 0; at < bytes; chunk++)
	{
		Size		n = chunk == 0 ? head_bytes : Min(bytes - at, WALS_IMAGE_CHUNK);
		bytea	   *data = palloc(VARHDRSZ + n);

		SET_VARSIZE(data, VARHDRSZ + n);
		memcpy(VARDATA(data), base + at, n);
		values[2] = Int32GetDatum(chunk);
		values[3] = PointerGetDatum(data);
		wals_spi_exec(insert, 4, types, values, SPI_OK_INSERT);
		pfree(data);
		at += n;
		CHECK_FOR_INTERRUPTS();
	}
	wals_unbecome(&save);
}

/*
 * The bytes of item_rel's images, and whether version has one; -1 where
 * the table is not the extension's.
 */
int64
wals_image_bytes(Oid item_rel, int64 version, bool *present)
{
	Oid			types[2] = {OIDOID, INT8OID};
	Datum		values[2];
	WalsRoleSave save;
	bool		isnull;
	int64		bytes;

	*present = false;
	if (!have_images())
		return -1;
	values[0] = ObjectIdGetDatum(item_rel);
	values[1] = Int64GetDatum(version);
	wals_become_catalog_writer(&save);
	wals_sql_expect(wals_sql(psprintf("SELECT pg_catalog.sum(pg_catalog.octet_length(data))::pg_catalog.int8,"
									  " pg_catalog.bool_or(version OPERATOR(pg_catalog.=) $2)"
									  " FROM %s WHERE item_table OPERATOR(pg_catalog.=) $1",
									  wals_catalog_table("wals_serving_images")),
							 2, types, values, NULL, true, 1),
					SPI_OK_SELECT, InvalidOid);
	wals_unbecome(&save);
	bytes = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		bytes = 0;
	*present = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)) &&
		!isnull;
	SPI_freetuptable(SPI_tuptable);
	return bytes;
}

/*
 * The rows of item_rel's images, in order of version and chunk, in
 * SPI_tuptable; 0 where there is none.  Their data stay toasted until
 * wals_image_data reads each.
 */
uint64
wals_image_rows(Oid item_rel)
{
	Oid			type = OIDOID;
	Datum		value = ObjectIdGetDatum(item_rel);
	WalsRoleSave save;

	if (!have_images())
		return 0;
	wals_become_catalog_writer(&save);
	wals_sql_expect(wals_sql(psprintf("SELECT version, chunk, data FROM %s"
									  " WHERE item_table OPERATOR(pg_catalog.=) $1"
									  " ORDER BY version, chunk",
									  wals_catalog_table("wals_serving_images")),
							 1, &type, &value, NULL, true, 0),
					SPI_OK_SELECT, InvalidOid);
	wals_unbecome(&save);
	return SPI_processed;
}

/* The version and the chunk of row k of rows, the result of wals_image_rows. */
void
wals_image_row(SPITupleTable *rows, uint64 k, int64 *version, int32 *chunk)
{
	bool		isnull;

	*version = DatumGetInt64(SPI_getbinval(rows->vals[k], rows->tupdesc, 1, &isnull));
	*chunk = DatumGetInt32(SPI_getbinval(rows->vals[k], rows->tupdesc, 2, &isnull));
}

/*
 * The bytes of row k of rows, detoasted into memory of the caller's to
 * free, and their number.
 */
bytea *
wals_image_data(SPITupleTable *rows, uint64 k, Size *len)
{
	bool		isnull;
	Datum		d = SPI_getbinval(rows->vals[k], rows->tupdesc, 3, &isnull);
	bytea	   *data = DatumGetByteaPCopy(d);

	*len = VARSIZE_ANY_EXHDR(data);
	return data;
}
