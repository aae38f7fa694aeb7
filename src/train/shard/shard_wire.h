/*
 * shard_wire.h
 *	  What both sides of a sharded training agree on: the bytes sent
 *	  between the coordinator (coord_plan.c, coord_engine.c) and its shards
 *	  (peer_*.c), bytea values whose integers and floats are big-endian, as
 *	  PostgreSQL's binary protocol has them, so that servers of either byte
 *	  order train together; and which rows a shard owns.
 *
 * A reader never trusts a length: every read checks that the bytes are
 * there, and a short or long message is an error naming what was read.
 */
#ifndef WALS_SHARD_WIRE_H
#define WALS_SHARD_WIRE_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "port/pg_bswap.h"

/* A message being read: the bytes, and how far the reader got. */
typedef struct WalsWire
{
	const char *data;
	size_t		len;
	size_t		at;
	const char *what;			/* for the error of a short message */
} WalsWire;

static inline void
wals_wire_start(WalsWire *w, const char *data, size_t len, const char *what)
{
	w->data = data;
	w->len = len;
	w->at = 0;
	w->what = what;
}

static inline const char *
wals_wire_take(WalsWire *w, size_t bytes)
{
	const char *p = w->data + w->at;

	if (bytes > w->len - w->at)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals: a sharded training's message (%s) ends early", w->what),
				 errdetail("%zu bytes were needed at byte %zu of %zu.", bytes, w->at, w->len)));
	w->at += bytes;
	return p;
}

static inline void
wals_wire_done(const WalsWire *w)
{
	if (w->at != w->len)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals: a sharded training's message (%s) is %zu bytes longer than expected",
						w->what, w->len - w->at)));
}

static inline int64
wals_wire_int64(WalsWire *w)
{
	uint64		v;

	memcpy(&v, wals_wire_take(w, sizeof(v)), sizeof(v));
	return (int64) pg_ntoh64(v);
}

/* A count read from the wire, refused outside [0, max]. */
static inline int64
wals_wire_count(WalsWire *w, int64 max)
{
	int64		n = wals_wire_int64(w);

	if (n < 0 || n > max)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals: a sharded training's message (%s) has a count of " INT64_FORMAT
						", not 0 to " INT64_FORMAT, w->what, n, max)));
	return n;
}

/*
 * A count of items of size bytes each that must all follow in the
 * message: refused before anything is allocated for them.
 */
static inline int64
wals_wire_count_of(WalsWire *w, size_t size, int64 max)
{
	int64		n = wals_wire_count(w, max);

	if ((uint64) n > (w->len - w->at) / size)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals: a sharded training's message (%s) counts " INT64_FORMAT
						" values where fewer follow", w->what, n)));
	return n;
}

static inline double
wals_wire_double(WalsWire *w)
{
	uint64		v;
	double		d;

	memcpy(&v, wals_wire_take(w, sizeof(v)), sizeof(v));
	v = pg_ntoh64(v);
	memcpy(&d, &v, sizeof(d));
	return d;
}

/* n int64 values into out. */
static inline void
wals_wire_int64s(WalsWire *w, int64 *out, int64 n)
{
	const char *p = wals_wire_take(w, sizeof(int64) * (size_t) n);

	for (int64 k = 0; k < n; k++)
	{
		uint64		v;

		memcpy(&v, p + sizeof(v) * k, sizeof(v));
		out[k] = (int64) pg_ntoh64(v);
	}
}

/* n int32 values into out. */
static inline void
wals_wire_int32s(WalsWire *w, int32 *out, int64 n)
{
	const char *p = wals_wire_take(w, sizeof(int32) * (size_t) n);

	for (int64 k = 0; k < n; k++)
	{
		uint32		v;

		memcpy(&v, p + sizeof(v) * k, sizeof(v));
		out[k] = (int32) pg_ntoh32(v);
	}
}

/*
 * n floats into out; a value that is not finite is refused (its exponent
 * bits all set), tested once over the whole run.
 */
static inline void
wals_wire_floats(WalsWire *w, float *out, int64 n)
{
	const char *p = wals_wire_take(w, sizeof(float) * (size_t) n);
	bool		finite = true;

	for (int64 k = 0; k < n; k++)
	{
		uint32		v;

		memcpy(&v, p + sizeof(v) * k, sizeof(v));
		v = pg_ntoh32(v);
		finite &= (v & 0x7f800000u) != 0x7f800000u;
		memcpy(&out[k], &v, sizeof(float));
	}
	if (!finite)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("wals: a sharded training's message (%s) holds a value that is not finite",
						w->what)));
}

/* n raw bytes. */
static inline const uint8 *
wals_wire_bytes(WalsWire *w, size_t n)
{
	return (const uint8 *) wals_wire_take(w, n);
}

static inline void
wals_put_int64(StringInfo s, int64 v)
{
	uint64		b = pg_hton64((uint64) v);

	appendBinaryStringInfoNT(s, (const char *) &b, sizeof(b));
}

static inline void
wals_put_double(StringInfo s, double d)
{
	uint64		b;

	memcpy(&b, &d, sizeof(b));
	b = pg_hton64(b);
	appendBinaryStringInfoNT(s, (const char *) &b, sizeof(b));
}

static inline void
wals_put_int64s(StringInfo s, const int64 *v, int64 n)
{
	enlargeStringInfo(s, (int) (sizeof(int64) * n));
	for (int64 k = 0; k < n; k++)
		wals_put_int64(s, v[k]);
}

static inline void
wals_put_int32(StringInfo s, int32 v)
{
	uint32		b = pg_hton32((uint32) v);

	appendBinaryStringInfoNT(s, (const char *) &b, sizeof(b));
}

/* n floats, swapped in one pass into room made once: factors are large. */
static inline void
wals_put_floats(StringInfo s, const float *v, int64 n)
{
	char	   *out;

	enlargeStringInfo(s, (int) (sizeof(float) * n));
	out = s->data + s->len;
	for (int64 k = 0; k < n; k++)
	{
		uint32		b;

		memcpy(&b, &v[k], sizeof(b));
		b = pg_hton32(b);
		memcpy(out + sizeof(b) * k, &b, sizeof(b));
	}
	s->len += (int) (sizeof(float) * n);
	s->data[s->len] = '\0';
}

/* Shards of a training at most: an owner is a byte of the plan. */
#define WALS_MAX_SHARDS			255

/*
 * The dense rows of one side that shard owns, increasing, from the owner
 * of each row: as the coordinator and the shard both list them.
 */
static inline int32 *
wals_shard_owned(const uint8 *owner, int64 n, int shard, int64 *nown)
{
	int32	   *own;
	int64		k = 0;

	*nown = 0;
	for (int64 j = 0; j < n; j++)
		*nown += owner[j] == shard;
	own = palloc_extended(sizeof(int32) * Max(*nown, 1), MCXT_ALLOC_HUGE);
	for (int64 j = 0; j < n; j++)
		if (owner[j] == shard)
			own[k++] = (int32) j;
	return own;
}

#endif							/* WALS_SHARD_WIRE_H */
