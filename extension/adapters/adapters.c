/*
 * adapters.c
 *		The table of provider adapters, and what they share: loading a
 *		source's read-API settings, URL escaping and URL templates.
 *
 * Adding a provider kind is one adapter file (a WiAdapter and its small
 * functions) and one line in the table below.
 */
#include "postgres.h"

#include <time.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "credentials.h"
#include "provider.h"
#include "webhook_inbox.h"

static const WiAdapter *const adapters[] = {
	&wi_adapter_stripe,
	&wi_adapter_shopify,
	&wi_adapter_github,
	&wi_adapter_generic,
};

/*
 * The adapter of a source: by kind, or the generic URL-template adapter when
 * the source's settings name a fetch_url or list_url (any signing kind may
 * have a read API).  NULL when the source has no read API at all.
 */
const WiAdapter *
wi_adapter_for(const WiSource *src)
{
	if (src == NULL || src->api_base == NULL)
		return NULL;
	if (src->fetch_url != NULL || src->list_url != NULL)
		return &wi_adapter_generic;
	for (int i = 0; i < lengthof(adapters); i++)
		if (strcmp(adapters[i]->kind, src->kind) == 0)
			return adapters[i];
	return NULL;
}

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
		}
	}
	SPI_finish();
	return src;
}

/*
 * A 2xx answer's body in the shape the mirror keeps: as it is, or as the
 * adapter's answer_shape SQL function turns it (a GraphQL answer into the
 * REST shape); NULL when that function finds nothing to keep (the save
 * then treats the answer as unreadable).  Needs the caller's transaction
 * and SPI connection; the result is palloc'd in the current context.
 */
const char *
wi_answer_shape(const WiAdapter *a, const WiSource *src, const char *object_type, const char *body)
{
	const char *fn = a->answer_shape ? a->answer_shape(src) : NULL;
	Oid			t[2] = {TEXTOID, TEXTOID};
	Datum		v[2];

	if (fn == NULL || body == NULL)
		return body;
	v[0] = CStringGetTextDatum(object_type);
	v[1] = CStringGetTextDatum(body);
	wi_spi_exec(psprintf("SELECT %s($1, $2)", fn), 2, t, v, NULL, SPI_OK_SELECT);
	return wi_spi_first_text();
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

/*
 * A request for a tenant that lives at its own origin (adapter->tenant_base:
 * a Shopify app's shop): its URL moves from api_base to the tenant's base,
 * its origin becomes the tenant's, and it carries the tenant's credentials
 * (wi_tenant_auth(), which refreshes an expiring token) instead of the
 * source's.  When the tenant has no usable credentials or no origin, the
 * request keeps no credentials at all and req->auth_wait says why: it is
 * never sent (fetch.c), and the claim waits without spending an attempt.
 * Needs a transaction.  Returns whether the tenant's credentials are
 * carried.
 */
static bool
tenant_origin(WiHttpRequest *req, const WiAdapter *adapter, const WiSource *src, const char *tenant)
{
	char	   *origin = NULL;
	char	   *why = NULL;
	char	   *base = adapter->tenant_base(src, tenant, &origin, &why);
	char	   *header = NULL;
	char	   *reason = NULL;
	size_t		n = src->api_base ? strlen(src->api_base) : 0;
	WiAuthStatus status;

	req->auth = NULL;
	if (base == NULL)
	{
		req->auth_wait = psprintf("credentials_flagged: %s", why ? why : "the tenant has no origin");
		return false;
	}
	if (n == 0 || req->url == NULL || strncmp(req->url, src->api_base, n) != 0)
	{
		req->auth_wait = psprintf("credentials_flagged: a request for tenant %s is not on the source's api_base",
								  tenant);
		return false;
	}
	req->url = psprintf("%s%s", base, req->url + n);
	req->origin = origin;
	if (IsTransactionState())
		status = wi_tenant_auth(src->id, tenant, 0, &header, &reason);
	else
	{
		/* a sweep's request is built between its steps' transactions */
		MemoryContext cxt = CurrentMemoryContext;

		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		MemoryContextSwitchTo(cxt);
		status = wi_tenant_auth(src->id, tenant, 0, &header, &reason);
		PopActiveSnapshot();
		CommitTransactionCommand();
		MemoryContextSwitchTo(cxt);
	}
	if (status == WI_AUTH_OK && header != NULL)
	{
		req->auth = header;
		return true;
	}
	if (status == WI_AUTH_FLAGGED)
		req->auth_wait = psprintf("credentials_flagged: %s", reason ? reason : "the tenant is flagged");
	else
		req->auth_wait = psprintf("credentials_wait: %s",
								  reason ? reason : psprintf("no credentials for tenant %s yet", tenant));
	return false;
}

/*
 * Scopes req (initialised by wi_http_init_request) to a tenant of src: the
 * adapter's scope headers, and whose credentials the request carries.  A
 * request for a tenant that the adapter cannot scope carries the source's
 * own ("") credentials, so that its answer is never taken for the tenant's.
 */
void
wi_request_scope(WiHttpRequest *req, const WiAdapter *adapter, const WiSource *src,
				 const char *tenant, const char *context)
{
	bool		carried = false;

	if (tenant == NULL)
		tenant = "";
	memset(req->scope, 0, sizeof(req->scope));
	if (adapter->scope_headers != NULL)
		carried = adapter->scope_headers(src, tenant, context, req->scope);
	if (tenant[0] != '\0' && adapter->tenant_base != NULL)
		carried = tenant_origin(req, adapter, src, tenant);
	req->credentials = (tenant[0] == '\0' || carried) ? tenant : "";
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
