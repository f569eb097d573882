/*
 * intake_read.c
 *		Reading a delivery: its payload (json_fast.c, or PostgreSQL's parser
 *		where that declines), its event id, type and correlation id by the
 *		source's kind (intake_ids.c), and the tenant it belongs to.
 *
 * Nothing here raises for a delivery's content: what fails a check is that
 * delivery's own outcome (see intake.c).
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/jsonapi.h"
#include "common/sha2.h"
#include "common/string.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "intake.h"

/*
 * intake_read_ids
 *		Parse r's body and find its event id, type and correlation id.  Never
 *		raises for the body's content: an unreadable body leaves r->payload
 *		NULL and sets r->reason.  Ids that travel in headers are read first,
 *		so even an unreadable body is deduplicated by the provider's own id.
 */
void
intake_read_ids(Row *r)
{
	SourceInfo *src = r->src;
	const WiKindLayout *layout = src->layout;
	int			len = VARSIZE_ANY_EXHDR(r->body);
	char	   *data = VARDATA_ANY(r->body);
	char	   *text;
	char	   *why = NULL;
	int			enc = GetDatabaseEncoding();
	WiIdPlaces	hmac = {NULL, NULL, NULL, NULL};
	const WiIdPlaces *places = NULL;

	if (layout->kind == WI_KIND_hmac)
	{
		hmac.event_id_header = intake_settings_text(src->settings, "event_id_header");
		hmac.event_type_header = intake_settings_text(src->settings, "event_type_header");
		hmac.event_id_path = intake_settings_text(src->settings, "event_id_path");
		hmac.event_type_path = intake_settings_text(src->settings, "event_type_path");
		places = &hmac;
	}
	wi_ids_from_headers(layout, places, r->hnames, r->hvalues, r->nheaders, &r->event_id, &r->event_type);
	r->correlation_id = intake_header_get(r, layout->correlation_header);

	if ((why = (char *) wi_body_unreadable(data, len)) != NULL)
		why = pstrdup(why);
	else if (len > MAX_JSON_BYTES)
		why = psprintf("too_large: bodies over %d MB are kept raw, not parsed",
					   MAX_JSON_BYTES / (1024 * 1024));
	else if (enc != PG_UTF8 && enc != PG_SQL_ASCII &&
			 !pg_is_ascii(pnstrdup(data, len)))
		why = pstrdup("unconvertible: the database encoding is not UTF8");
	if (why == NULL && (r->payload = wi_jsonb_fast(data, len)) == NULL)
	{
		/* PostgreSQL's parser decides, and words why it refuses */
		text = pnstrdup(data, len);
		r->payload = wi_jsonb_parse(text, len, &why);
		if (r->payload == NULL)
			why = intake_clip_reason(why);
	}
	if (r->payload == NULL)
	{
		r->reason = why;
		return;
	}

	/* the stable event id and the type, where the body holds them */
	wi_ids_from_body(layout, places, intake_jsonb_path_text, r->payload, &r->event_id, &r->event_type);
}

/* Is the body readable and identified, so that the routes can decide it? */
bool
intake_needs_route(Row *r)
{
	return r->outcome == INTAKE_UNDECIDED && r->reason == NULL;
}

/*
 * Check what only the event itself can get wrong, after intake_read_ids(): an
 * over-long id refuses the delivery, a missing id or type quarantines it.
 */
void
intake_check_ids(Row *r)
{
	const char *why;

	if (r->event_id != NULL && r->event_id[0] == '\0')
		r->event_id = NULL;
	if (r->event_type != NULL && r->event_type[0] == '\0')
		r->event_type = NULL;
	if (r->event_id != NULL && strlen(r->event_id) > MAX_ID_BYTES)
	{
		intake_refuse(r, INTAKE_REFUSE_EVENT_ID_TOO_LONG, "the event id is %zu bytes, the limit is %d",
					  strlen(r->event_id), MAX_ID_BYTES);
		return;
	}
	if (r->event_type != NULL && strlen(r->event_type) > MAX_ID_BYTES)
	{
		intake_refuse(r, INTAKE_REFUSE_EVENT_TYPE_TOO_LONG, "the event type is %zu bytes, the limit is %d",
					  strlen(r->event_type), MAX_ID_BYTES);
		return;
	}
	if (r->correlation_id != NULL && strlen(r->correlation_id) > MAX_ID_BYTES)
	{
		intake_refuse(r, INTAKE_REFUSE_CORRELATION_ID_TOO_LONG, "the correlation id is %zu bytes, the limit is %d",
					  strlen(r->correlation_id), MAX_ID_BYTES);
		return;
	}
	if (r->reason != NULL)
		return;
	why = wi_ids_missing(&r->event_id, &r->event_type);
	if (why != NULL)
		r->reason = pstrdup(why);
}

/*
 * The JSON value at a key path of a top-level object into *buf, or NULL
 * when a key is missing (a JSON null is returned as a jbvNull value).
 */
static JsonbValue *
jsonb_path_value(Jsonb *jb, const char *const *path, JsonbValue *buf)
{
	JsonbContainer *c = &jb->root;
	JsonbValue *cur = NULL;

	if (!JB_ROOT_IS_OBJECT(jb))
		return NULL;
	for (int i = 0; path[i] != NULL; i++)
	{
		if (i > 0)
		{
			if (cur->type != jbvBinary || !JsonContainerIsObject(cur->val.binary.data))
				return NULL;
			c = cur->val.binary.data;
		}
		cur = getKeyJsonValueFromContainer(c, path[i], strlen(path[i]), buf);
		if (cur == NULL)
			return NULL;
	}
	return cur;
}

static const char *
jsonb_type_name(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "a string";
		case jbvNumeric:
			return "a number";
		case jbvBool:
			return "a boolean";
		case jbvBinary:
			return JsonContainerIsObject(v->val.binary.data) ? "an object" : "an array";
		default:
			return "not a scalar";
	}
}

/*
 * Refuses r with reason "tenant_invalid: ..." unless value (from where) is
 * an identity the provider would send: 1 to MAX_ID_BYTES bytes, no control
 * characters.  Returns whether it is.
 */
static bool
tenant_valid(Row *r, const char *where, const char *value)
{
	size_t		len = strlen(value);

	if (len == 0 || len > MAX_ID_BYTES)
	{
		intake_refuse(r, INTAKE_REFUSE_TENANT_INVALID, "%s is %zu bytes, it must be 1 to %d",
					  where, len, MAX_ID_BYTES);
		return false;
	}
	for (const unsigned char *p = (const unsigned char *) value; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
		{
			intake_refuse(r, INTAKE_REFUSE_TENANT_INVALID, "%s contains a control character",
						  where);
			return false;
		}
	return true;
}

/*
 * The string at a key path of r's payload, or NULL when absent or null;
 * anything but a string refuses r.  *ok is false once r is refused.
 */
static char *
tenant_string(Row *r, const char *const *path, const char *where, bool *ok)
{
	JsonbValue	buf;
	JsonbValue *v = jsonb_path_value(r->payload, path, &buf);
	char	   *s;

	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type != jbvString)
	{
		intake_refuse(r, INTAKE_REFUSE_TENANT_INVALID, "%s is %s, not a string",
					  where, jsonb_type_name(v));
		*ok = false;
		return NULL;
	}
	s = pnstrdup(v->val.string.val, v->val.string.len);
	if (!tenant_valid(r, where, s))
	{
		*ok = false;
		return NULL;
	}
	return s;
}

/*
 * intake_read_tenant
 *		The provider account r belongs to, as the provider's contract names
 *		it: Stripe's top-level account (Connect), or its context (Stripe
 *		Organizations, thin events; it supersedes the account for the
 *		credentials and is kept beside it); GitHub's installation.id (a
 *		GitHub App's deliveries); Shopify's X-Shopify-Shop-Domain, for a
 *		source whose settings say "tenants": true (an app installed in many
 *		shops: every Shopify delivery names its shop, so a one-shop source
 *		keeps the empty tenant).  settings "tenants": false turns it off for
 *		any kind.  A value that is not what the provider sends refuses r
 *		alone; its batch-mates are untouched.
 */
void
intake_read_tenant(Row *r)
{
	const WiKindLayout *layout = r->src->layout;
	char	   *setting = intake_settings_text(r->src->settings, "tenants");
	bool		ok = true;

	r->tenant = "";
	r->tenant_context = NULL;
	if (setting != NULL && strcmp(setting, "false") == 0)
		return;
	if (layout->kind == WI_KIND_shopify)
	{
		char	   *shop = intake_header_get(r, "x-shopify-shop-domain");

		bool		tenants = setting != NULL && strcmp(setting, "true") == 0;

		if (shop != NULL && !tenant_valid(r, "X-Shopify-Shop-Domain", shop))
			return;
		/* the header routes; the signed body, where it names a shop, decides */
		if (!intake_shopify_tenant(r, shop, tenants) || !tenants || shop == NULL)
			return;
		r->tenant = pstrdup(shop);
		return;
	}
	if (r->payload == NULL)
		return;					/* unreadable: kept in quarantine as it is */
	if (layout->kind == WI_KIND_stripe)
	{
		const char *acct_path[] = {"account", NULL};
		const char *ctx_path[] = {"context", NULL};
		char	   *acct = tenant_string(r, acct_path, "account", &ok);
		char	   *ctx = ok ? tenant_string(r, ctx_path, "context", &ok) : NULL;

		if (!ok || !intake_stripe_tenant_ok(r, acct, ctx))
			return;
		r->tenant = acct ? acct : (ctx ? ctx : "");
		r->tenant_context = ctx;
	}
	else if (layout->kind == WI_KIND_github)
	{
		const char *inst_path[] = {"installation", NULL};
		const char *id_path[] = {"installation", "id", NULL};
		JsonbValue	buf;
		JsonbValue *v = jsonb_path_value(r->payload, inst_path, &buf);
		char	   *id;

		if (v == NULL || v->type == jbvNull)
			return;
		v = jsonb_path_value(r->payload, id_path, &buf);
		if (v == NULL || v->type != jbvNumeric)
		{
			intake_refuse(r, INTAKE_REFUSE_TENANT_INVALID, "installation.id is %s, not a number",
						  v ? jsonb_type_name(v) : "missing");
			return;
		}
		/* the number as the body writes it: 1e3 and 1000.0 are no ids */
		id = intake_github_installation(r);
		if (id != NULL && tenant_valid(r, "installation.id", id))
			r->tenant = id;
	}
}
