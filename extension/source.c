/*
 * source.c
 *		What every part that talks to a provider shares, below the adapters:
 *		loading a source's read-API settings, URL escaping, URL templates
 *		and ISO-8601 times.  It calls none of its callers (the adapters,
 *		credentials.c, the sweeps and rounds), so they may all lean on it.
 */
#include "postgres.h"

#include <time.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"

#include "provider.h"

static char *
copy_value(HeapTuple tup, TupleDesc desc, int col, MemoryContext cxt)
{
	char	   *v = SPI_getvalue(tup, desc, col);

	return v ? MemoryContextStrdup(cxt, v) : NULL;
}

/*
 * Reads a source through _worker_source() into the caller's memory context.
 * Needs a transaction; connects to SPI itself.  NULL if the source is gone.
 */
WiSource *
wi_source_load(int32 source_id)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(source_id)};
	WiSource   *src = NULL;
	int			rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	rc = SPI_execute_with_args("SELECT * FROM webhook_inbox._worker_source($1)", 1, types, args,
							   NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "webhook_inbox: reading source %d failed: %s", source_id,
			 SPI_result_code_string(rc));
	if (SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		SPI_getbinval(tup, desc, 1, &isnull);
		if (!isnull)
		{
			src = MemoryContextAllocZero(cxt, sizeof(WiSource));
			src->id = source_id;
			src->name = copy_value(tup, desc, 2, cxt);
			src->kind = copy_value(tup, desc, 3, cxt);
			src->api_base = copy_value(tup, desc, 4, cxt);
			src->api_token = copy_value(tup, desc, 5, cxt);
			src->fetch_url = copy_value(tup, desc, 6, cxt);
			src->list_url = copy_value(tup, desc, 7, cxt);
			src->auth_header = copy_value(tup, desc, 8, cxt);
			src->auth_format = copy_value(tup, desc, 9, cxt);
			src->unwrap_path = copy_value(tup, desc, 10, cxt);
			src->items_path = copy_value(tup, desc, 11, cxt);
			src->status_path = copy_value(tup, desc, 12, cxt);
			src->version_path = copy_value(tup, desc, 13, cxt);
			src->types = copy_value(tup, desc, 14, cxt);
			src->repo = copy_value(tup, desc, 15, cxt);
			src->api_version = copy_value(tup, desc, 16, cxt);
			src->api = copy_value(tup, desc, 17, cxt);
			src->stripe_version = copy_value(tup, desc, 18, cxt);
			src->shop_base_url = copy_value(tup, desc, 19, cxt);
			{
				char	   *rate = SPI_getvalue(tup, desc, 20);
				char	   *endpoint_rate = SPI_getvalue(tup, desc, 21);

				/* numbers > 0, as sources_pacing_check has it */
				src->rate_limit = rate ? strtod(rate, NULL) : 0;
				src->endpoint_rate_limit = endpoint_rate ? strtod(endpoint_rate, NULL) : 0;
			}
			src->rate_limit_scope = copy_value(tup, desc, 22, cxt);
		}
	}
	SPI_finish();
	return src;
}

/* Percent-encodes everything but RFC 3986's unreserved characters. */
char *
wi_url_escape(const char *s)
{
	StringInfoData b;

	initStringInfo(&b);
	for (const unsigned char *p = (const unsigned char *) s; *p; p++)
	{
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
			*p == '-' || *p == '.' || *p == '_' || *p == '~')
			appendStringInfoChar(&b, (char) *p);
		else
			appendStringInfo(&b, "%%%02X", *p);
	}
	return b.data;
}

/*
 * Expands {key} placeholders of tmpl from the NULL-terminated keys and
 * values (values are inserted as they are: escape them first).  Unknown
 * placeholders are kept verbatim.
 */
char *
wi_template(const char *tmpl, const char *const *keys, const char *const *values)
{
	StringInfoData b;

	initStringInfo(&b);
	for (const char *p = tmpl; *p;)
	{
		bool		done = false;

		if (*p == '{')
		{
			for (int k = 0; keys[k] != NULL && !done; k++)
			{
				size_t		len = strlen(keys[k]);

				if (strncmp(p + 1, keys[k], len) == 0 && p[len + 1] == '}')
				{
					appendStringInfoString(&b, values[k] ? values[k] : "");
					p += len + 2;
					done = true;
				}
			}
		}
		if (!done)
			appendStringInfoChar(&b, *p++);
	}
	return b.data;
}

/* ISO-8601 UTC of epoch seconds, for list APIs that filter by time. */
char *
wi_iso_time(int64 epoch)
{
	time_t		t = (time_t) epoch;
	struct tm	tm;
	char		buf[64];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return pstrdup(buf);
}
