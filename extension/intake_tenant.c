/*
 * intake_tenant.c
 *		Which tenant a delivery belongs to, judged by what its provider
 *		signs: the formats each provider gives its tenant identities, and for
 *		Shopify, whose signature covers the body and not the header naming
 *		the shop, the comparison of that header with the shop the signed
 *		body names.
 *
 * A receiver verifies Shopify's X-Shopify-Hmac-Sha256 over the body alone,
 * so a body signed for shop A can be sent again with shop B's
 * X-Shopify-Shop-Domain and pass.  Where the topic's body names its shop
 * (the compliance topics' shop_domain, the shop object's myshopify_domain
 * in app/uninstalled and shop/update), a header that disagrees refuses the
 * delivery (tenant_mismatch): nothing is stored and nothing acts.  Where a
 * topic acts on the tenant as a whole (erasure, data requests, uninstall)
 * and its body does not name the shop, the delivery is kept in quarantine
 * (tenant_unconfirmed) instead of acting on the header's word.  Every other
 * topic is routed by the header, as Shopify intends; docs/receiver.md's
 * threat model says what such a replay can and cannot do.
 *
 * Stripe's account and context and GitHub's installation.id are in the
 * signed body, so nothing unsigned names those tenants; here they are only
 * held to their providers' formats, read from the body's own text (GitHub's
 * 1e3 is not installation 1000).
 *
 * Last, the tenants deliveries may register are capped per source and hour
 * (settings.tenants_per_hour): past the cap a new tenant's deliveries wait
 * in quarantine (tenant_cap) instead of growing what the source reads for.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "intake.h"
#include "pg_compat.h"
#include "provider.h"

/* Where a Shopify topic's signed body names its shop, and whether it acts. */
typedef struct ShopifyTopic
{
	const char *topic;
	const char *const *fields;	/* top-level fields, most specific first */
	bool		acts;			/* erases, lists or disables the tenant */
} ShopifyTopic;

static const char *const compliance_fields[] = {"shop_domain", NULL};

/* the shop object: myshopify_domain, or domain where that is the shop's own */
static const char *const shop_fields[] = {"myshopify_domain", "domain", NULL};

static const ShopifyTopic shopify_topics[] = {
	{"customers/redact", compliance_fields, true},
	{"shop/redact", compliance_fields, true},
	{"customers/data_request", compliance_fields, true},
	{"app/uninstalled", shop_fields, true},
	{"shop/update", shop_fields, false},
};

static const ShopifyTopic *
shopify_topic(const char *topic)
{
	if (topic == NULL)
		return NULL;
	for (size_t i = 0; i < lengthof(shopify_topics); i++)
		if (strcmp(shopify_topics[i].topic, topic) == 0)
			return &shopify_topics[i];
	return NULL;
}

/* The string of a top-level field of payload, or NULL when it is none. */
static char *
top_string(Jsonb *payload, const char *key)
{
	JsonbValue	buf;
	JsonbValue *v;

	if (payload == NULL || !JB_ROOT_IS_OBJECT(payload))
		return NULL;
	v = getKeyJsonValueFromContainer(&payload->root, key, strlen(key), &buf);
	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * The shop r's signed body names, or NULL.  A shop's domain field may be a
 * custom domain (shop.example.com), which names no shop we can compare: only
 * a myshopify.com domain counts.
 */
static char *
body_shop(Row *r, const ShopifyTopic *t)
{
	for (int i = 0; t->fields[i] != NULL; i++)
	{
		char	   *s = top_string(r->payload, t->fields[i]);

		if (s != NULL && wi_shopify_shop_domain_ok(s))
			return s;
	}
	return NULL;
}

/*
 * intake_shopify_tenant
 *		Judge the shop of a Shopify delivery r: header is its
 *		X-Shopify-Shop-Domain (NULL when absent); tenants says whether the
 *		source serves many shops (then the header names r's tenant).
 *		Refuses r when the header is not a shop's domain (tenant_invalid) or
 *		disagrees with the shop the signed body names (tenant_mismatch);
 *		sets r->reason (quarantine) when the topic acts on the tenant and
 *		nothing signed names it.  Returns whether r may take the header's
 *		shop as its tenant.
 */
bool
intake_shopify_tenant(Row *r, const char *header, bool tenants)
{
	const ShopifyTopic *t = shopify_topic(r->event_type);
	char	   *signed_shop;

	if (header != NULL && !wi_shopify_shop_domain_ok(header))
	{
		/* only where it names the tenant: a one-shop source ignores it */
		if (tenants)
		{
			intake_refuse(r, INTAKE_REFUSE_TENANT_INVALID,
						  "X-Shopify-Shop-Domain is not a shop's myshopify.com domain");
			return false;
		}
		header = NULL;
	}
	if (t == NULL)
		return true;			/* the body names no shop: the header routes */
	signed_shop = body_shop(r, t);
	if (signed_shop != NULL && header != NULL && strcmp(signed_shop, header) != 0)
	{
		intake_refuse(r, INTAKE_REFUSE_TENANT_MISMATCH,
					  "X-Shopify-Shop-Domain %s is not %s, the shop the signed body names",
					  header, signed_shop);
		return false;
	}
	if (signed_shop == NULL && t->acts && tenants && r->reason == NULL)
		r->reason = psprintf("tenant_unconfirmed: the signed body of %s names no shop, and the topic would act on shop %s",
							 t->topic, header ? header : "(none)");
	return true;
}

/*
 * Stripe's account ids (acct_ and letters and digits), and its contexts:
 * one or more such ids, or other Stripe object ids (org_...), joined by '/'.
 */
static bool
stripe_id_ok(const char *s, const char *prefix)
{
	size_t		n = strlen(prefix);
	const char *p;

	if (prefix[0] != '\0')
	{
		if (strncmp(s, prefix, n) != 0)
			return false;
		p = s + n;
	}
	else
	{
		p = s;
		while (*p >= 'a' && *p <= 'z')
			p++;
		if (p == s || *p++ != '_')
			return false;
	}
	if (*p == '\0')
		return false;
	for (; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

/*
 * Refuses r (tenant_invalid) unless account (when not NULL) is a Stripe
 * account id and context (when not NULL) a Stripe context.  Returns whether
 * both are.
 */
bool
intake_stripe_tenant_ok(Row *r, const char *account, const char *context)
{
	if (account != NULL && !stripe_id_ok(account, "acct_"))
	{
		intake_refuse(r, INTAKE_REFUSE_TENANT_INVALID, "account is not a Stripe account id (acct_...)");
		return false;
	}
	if (context != NULL)
	{
		char	   *copy = pstrdup(context);
		char	   *save = NULL;
		int			parts = 0;
		bool		ok = context[0] != '/' && context[strlen(context) - 1] != '/' &&
			strstr(context, "//") == NULL;

		for (char *seg = strtok_r(copy, "/", &save); ok && seg; seg = strtok_r(NULL, "/", &save))
		{
			ok = stripe_id_ok(seg, "");
			parts++;
		}
		if (!ok || parts == 0)
		{
			intake_refuse(r, INTAKE_REFUSE_TENANT_INVALID,
						  "context is not a Stripe context (ids such as acct_... joined by /)");
			return false;
		}
	}
	return true;
}

/* Finds the text of the token at installation.id of a GitHub body. */
typedef struct InstallationScan
{
	int			depth;			/* of the container being read */
	bool		field_installation; /* the top-level field is installation */
	bool		in_installation;	/* reading that object */
	bool		field_id;		/* its field is id */
	char	   *token;			/* the last id token: keys repeat, the last wins */
	JsonTokenType type;
} InstallationScan;

static WiJsonAction
scan_object_start(void *state)
{
	InstallationScan *s = state;

	s->depth++;
	if (s->depth == 2 && s->field_installation)
		s->in_installation = true;
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
scan_object_end(void *state)
{
	InstallationScan *s = state;

	if (s->depth == 2)
		s->in_installation = false;
	s->depth--;
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
scan_array_start(void *state)
{
	((InstallationScan *) state)->depth++;
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
scan_array_end(void *state)
{
	((InstallationScan *) state)->depth--;
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
scan_field(void *state, char *fname, bool isnull)
{
	InstallationScan *s = state;

	if (s->depth == 1)
		s->field_installation = strcmp(fname, "installation") == 0;
	else if (s->depth == 2 && s->in_installation)
		s->field_id = strcmp(fname, "id") == 0;
	WI_JSON_ACTION_DONE;
}

static WiJsonAction
scan_scalar(void *state, char *token, JsonTokenType tokentype)
{
	InstallationScan *s = state;

	if (s->depth == 2 && s->in_installation && s->field_id)
	{
		s->token = token;
		s->type = tokentype;
		s->field_id = false;
	}
	WI_JSON_ACTION_DONE;
}

/*
 * The installation id of GitHub delivery r as its body writes it: the text
 * of the number at installation.id, or NULL (with r refused, tenant_invalid)
 * when that is not a positive integer written in digits.  The body was
 * already read as JSON (the payload), so this pass cannot fail on syntax;
 * it is only run for bodies that name an installation.
 */
char *
intake_github_installation(Row *r)
{
	InstallationScan s;
	JsonSemAction sem;
	JsonLexContext *lex;
	char	   *data = VARDATA_ANY(r->body);
	int			len = VARSIZE_ANY_EXHDR(r->body);

	memset(&s, 0, sizeof(s));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &s;
	sem.object_start = scan_object_start;
	sem.object_end = scan_object_end;
	sem.array_start = scan_array_start;
	sem.array_end = scan_array_end;
	sem.object_field_start = scan_field;
	sem.scalar = scan_scalar;
	lex = makeJsonLexContextCstringLenCompat(data, len, GetDatabaseEncoding(), true);
	if (pg_parse_json(lex, &sem) != JSON_SUCCESS || s.token == NULL ||
		s.type != JSON_TOKEN_NUMBER)
	{
		intake_refuse(r, INTAKE_REFUSE_TENANT_INVALID, "installation.id is not a number");
		return NULL;
	}
	if (s.token[0] == '0' || strspn(s.token, "0123456789") != strlen(s.token) ||
		strlen(s.token) > 19)
	{
		intake_refuse(r, INTAKE_REFUSE_TENANT_INVALID,
					  "installation.id %s is not a positive integer written in digits", s.token);
		return NULL;
	}
	return pstrdup(s.token);
}

/* ---------------------------------------------------------------------
 * The cap on tenants a source's deliveries register
 * --------------------------------------------------------------------- */

static SPIPlanPtr cap_plan = NULL;

/*
 * Of the batch's (source, tenant) pairs, those not registered yet that
 * would take their source past its settings.tenants_per_hour (default
 * 1000; a value that is no whole number counts as the default): the
 * tenants its deliveries registered in the past hour (tenants_recent_idx),
 * plus the new ones of this batch before it, in tenant order.  A tenant
 * registered by the provider's list or by hand is never capped.
 */
static const char *const cap_sql =
"WITH b AS (SELECT DISTINCT u.sid, u.tenant FROM unnest($1::integer[], $2::text[]) AS u(sid, tenant)), "
"n AS (SELECT b.sid, b.tenant, row_number() OVER (PARTITION BY b.sid ORDER BY b.tenant) AS k FROM b "
"      WHERE NOT EXISTS (SELECT FROM webhook_inbox.tenants t WHERE t.source_id = b.sid AND t.tenant = b.tenant)) "
"SELECT n.sid, n.tenant, c.cap "
"FROM n JOIN webhook_inbox.sources s ON s.id = n.sid "
"CROSS JOIN LATERAL (SELECT CASE WHEN s.settings ->> 'tenants_per_hour' ~ '^[0-9]{1,9}$' "
"      THEN (s.settings ->> 'tenants_per_hour')::integer ELSE 1000 END AS cap) c "
"WHERE n.k + (SELECT count(*) FROM webhook_inbox.tenants t WHERE t.source_id = n.sid "
"      AND t.discovered_by = 'delivery' AND t.first_seen > now() - interval '1 hour') > c.cap";

/* Plans this file's statement once per session. */
void
intake_tenant_prepare(void)
{
	if (cap_plan == NULL)
	{
		Oid			types[2] = {INT4ARRAYOID, TEXTARRAYOID};

		cap_plan = wi_keep_plan(cap_sql, 2, types);
	}
}

/*
 * intake_cap_tenants
 *		Quarantines (reason tenant_cap) the rows of rows[0..n-1] whose tenant
 *		is new to its source and over the source's cap on tenants registered
 *		by deliveries per hour: such a row is stored once, shown in queues,
 *		and registers no tenant, so that signed deliveries naming made-up
 *		tenants cannot grow the tenants a source reads for without bound.
 *		One statement, and only for a batch with tenants.  Two batches
 *		committing at once may each take the last places: the cap may be
 *		passed by a batch's worth.  Must run inside SPI.
 */
void
intake_cap_tenants(Row *rows, int n)
{
	ArrBuild	sids;
	ArrBuild	tens;
	Datum		args[2];
	int			rc;

	intake_arr_init(&sids, n);
	intake_arr_init(&tens, n);
	for (int i = 0; i < n; i++)
	{
		Row		   *r = &rows[i];

		if (r->outcome != INTAKE_UNDECIDED || r->reason != NULL || r->tenant == NULL || r->tenant[0] == '\0')
			continue;
		intake_arr_add(&sids, Int32GetDatum(r->src->id), false);
		intake_arr_text(&tens, r->tenant);
	}
	if (sids.n == 0)
		return;
	args[0] = intake_arr_done(&sids, INT4OID);
	args[1] = intake_arr_done(&tens, TEXTOID);
	rc = SPI_execute_plan(cap_plan, args, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "webhook_inbox: checking the tenant cap failed: %s", SPI_result_code_string(rc));
	for (uint64 t = 0; t < SPI_processed; t++)
	{
		HeapTuple	tup = SPI_tuptable->vals[t];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int32		sid = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		char	   *tenant = TextDatumGetCString(SPI_getbinval(tup, desc, 2, &isnull));
		int32		cap = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));

		for (int i = 0; i < n; i++)
		{
			Row		   *r = &rows[i];

			if (r->outcome == INTAKE_UNDECIDED && r->reason == NULL && r->src != NULL &&
				r->src->id == sid && strcmp(r->tenant, tenant) == 0)
				r->reason = psprintf("tenant_cap: tenant %s would be one more than the %d new tenants an hour its source's deliveries may register (settings.tenants_per_hour)",
									 tenant, cap);
		}
	}
	SPI_freetuptable(SPI_tuptable);
}
