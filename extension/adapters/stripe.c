/*
 * stripe.c
 *		Stripe's read API as stripe-node types it: GET /v1/{collection}/{id},
 *		the list GET /v1/{collection}?limit=100&starting_after={id}, and the
 *		events list GET /v1/events?limit=100&created[gte]=&types[0]=...,
 *		all paged by has_more and the last id of the page (never a Link
 *		header).
 *
 * Stripe answers any parameter a list does not declare with 400
 * parameter_unknown, so a list carries only limit, starting_after and the
 * filters its *ListParams declare: status=all for subscriptions, whose list
 * otherwise omits canceled ones (SubscriptionListParams.Status).  No object
 * list filters by update time (created is the creation time), so an object
 * list is always the full listing of its type; "what happened since" is the
 * events list (EventListParams: created, types of at most 20 names), which
 * keeps 30 days.  Parameters are written as stripe-node writes them:
 * created[gte]=…, types[0]=…, brackets unescaped.
 *
 * Mirror object types map to API collections and the event types that
 * change them (WebhookEndpointCreateParams.EnabledEvent) through the table
 * below.  No Stripe object carries a version: the sweep refetches before a
 * repair.  Refunds and disputes are mirrored (their statuses followed) and
 * also recorded once as occurrences with amount and currency.
 */
#include "postgres.h"

#include "provider.h"

#define STRIPE_EVENTS_WINDOW_S (30 * 86400)
#define STRIPE_MAX_TYPES 20

typedef struct StripeType
{
	WiTypeMap	map;
	const char *list_filter;	/* "&status=all" or "" */
	const char *events[STRIPE_MAX_TYPES + 1];	/* NULL-terminated */
} StripeType;

#define PI_EVENTS {"payment_intent.amount_capturable_updated", "payment_intent.canceled", \
	"payment_intent.created", "payment_intent.partially_funded", "payment_intent.payment_failed", \
	"payment_intent.processing", "payment_intent.requires_action", "payment_intent.succeeded", NULL}

static const StripeType stripe_types[] = {
	{{"subscription", "subscriptions", "$", "$.data[*]", "$.status", NULL, false}, "&status=all",
	{"customer.subscription.created", "customer.subscription.deleted", "customer.subscription.paused",
		"customer.subscription.pending_update_applied", "customer.subscription.pending_update_expired",
		"customer.subscription.resumed", "customer.subscription.trial_will_end",
	"customer.subscription.updated", NULL}},
	{{"payment_intent", "payment_intents", "$", "$.data[*]", "$.status", NULL, false}, "", PI_EVENTS},
	{{"customer", "customers", "$", "$.data[*]", NULL, NULL, false}, "",
	{"customer.created", "customer.deleted", "customer.updated", "customer.discount.created",
		"customer.discount.deleted", "customer.discount.updated", "customer.source.created",
		"customer.source.deleted", "customer.source.expiring", "customer.source.updated",
	"customer.tax_id.created", "customer.tax_id.deleted", "customer.tax_id.updated", NULL}},
	{{"invoice", "invoices", "$", "$.data[*]", "$.status", NULL, false}, "",
	{"invoice.created", "invoice.deleted", "invoice.finalization_failed", "invoice.finalized",
		"invoice.marked_uncollectible", "invoice.overdue", "invoice.overpaid", "invoice.paid",
		"invoice.payment_action_required", "invoice.payment_attempt_required",
		"invoice.payment_failed", "invoice.payment_succeeded", "invoice.sent", "invoice.updated",
	"invoice.voided", "invoice.will_be_due", NULL}},
	{{"charge", "charges", "$", "$.data[*]", "$.status", NULL, false}, "",
	{"charge.captured", "charge.expired", "charge.failed", "charge.pending", "charge.refunded",
	"charge.succeeded", "charge.updated", NULL}},
	{{"refund", "refunds", "$", "$.data[*]", "$.status", NULL, true}, "",
	{"refund.created", "refund.failed", "refund.updated", "charge.refund.updated", NULL}},
	{{"dispute", "disputes", "$", "$.data[*]", "$.status", NULL, true}, "",
	{"charge.dispute.closed", "charge.dispute.created", "charge.dispute.funds_reinstated",
	"charge.dispute.funds_withdrawn", "charge.dispute.updated", NULL}},
	{{"checkout.session", "checkout/sessions", "$", "$.data[*]", "$.status", NULL, false}, "",
	{"checkout.session.async_payment_failed", "checkout.session.async_payment_succeeded",
	"checkout.session.completed", "checkout.session.expired", NULL}},
	/* the mirror's name of PaymentIntents before 0.2.0 */
	{{"payment", "payment_intents", "$", "$.data[*]", "$.status", NULL, false}, "", PI_EVENTS},
};

static const StripeType *
stripe_type(const char *object_type)
{
	for (int i = 0; i < lengthof(stripe_types); i++)
		if (strcmp(stripe_types[i].map.object_type, object_type) == 0)
			return &stripe_types[i];
	return NULL;
}

static bool
stripe_type_map(const WiSource *src, const char *object_type, WiTypeMap *out)
{
	const StripeType *t = stripe_type(object_type);

	if (t == NULL)
		return false;
	*out = t->map;
	return true;
}

static char *
stripe_object_url(const WiSource *src, const WiTypeMap *t, const char *object_id)
{
	return psprintf("%s/v1/%s/%s", src->api_base, t->collection, wi_url_escape(object_id));
}

/* The full listing, whatever since_epoch: no Stripe list filters by update time. */
static char *
stripe_list_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	const StripeType *st = stripe_type(t->object_type);

	if (cursor != NULL)
		return psprintf("%s/v1/%s?limit=100%s&starting_after=%s", src->api_base, t->collection,
						st->list_filter, wi_url_escape(cursor));
	return psprintf("%s/v1/%s?limit=100%s", src->api_base, t->collection, st->list_filter);
}

/* The events that changed objects of the type since since_epoch (newest first). */
static char *
stripe_events_url(const WiSource *src, const WiTypeMap *t, int64 since_epoch, const char *cursor)
{
	const StripeType *st = stripe_type(t->object_type);
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfo(&b, "%s/v1/events?limit=100&created[gte]=" INT64_FORMAT, src->api_base,
					 Max(since_epoch, 0));
	for (int i = 0; st->events[i] != NULL; i++)
		appendStringInfo(&b, "&types[%d]=%s", i, st->events[i]);
	if (cursor != NULL)
		appendStringInfo(&b, "&starting_after=%s", wi_url_escape(cursor));
	return b.data;
}

static char *
stripe_auth_header(const WiSource *src)
{
	return src->api_token ? psprintf("Authorization: Bearer %s", src->api_token) : NULL;
}

/*
 * A connected account's objects, lists and events are read with the
 * platform's key and Stripe-Account naming the account, or Stripe-Context
 * when the account's events carried a context (it supersedes
 * Stripe-Account; stripe-node refuses to send both, utils.js "Can't
 * specify both stripeAccount and stripeContext").  A context is used only
 * when its path (acct_org/acct_platform/acct_x) ends at the tenant, so a
 * request always names the tenant's own account.  Every request pins the
 * source's Stripe-Version.
 */
static bool
stripe_scope_headers(const WiSource *src, const char *tenant, const char *context, char **out)
{
	int			n = 0;
	const char *last;

	if (src->stripe_version != NULL && src->stripe_version[0] != '\0')
		out[n++] = psprintf("Stripe-Version: %s", src->stripe_version);
	if (tenant[0] == '\0')
		return true;
	/* a context is the tenant's only if its path ends at the tenant's account */
	last = context ? strrchr(context, '/') : NULL;
	last = last ? last + 1 : context;
	if (last != NULL && strcmp(last, tenant) == 0)
		out[n++] = psprintf("Stripe-Context: %s", context);
	else
		out[n++] = psprintf("Stripe-Account: %s", tenant);
	return true;
}

/*
 * A Connect platform's connected accounts: GET /v1/accounts
 * (AccountListParams: limit at most 100, starting_after), newest first.
 */
static char *
stripe_tenants_url(const WiSource *src, const char *cursor)
{
	if (cursor != NULL)
		return psprintf("%s/v1/accounts?limit=100&starting_after=%s", src->api_base, wi_url_escape(cursor));
	return psprintf("%s/v1/accounts?limit=100", src->api_base);
}

/*
 * Stripe's rate limits (https://docs.stripe.com/rate-limits): "measured in
 * API requests per second, per Stripe account", 100/s in live mode and 25/s
 * in a sandbox, and 25/s per endpoint by default.  A live key says so by
 * its prefix (sk_live_, rk_live_); any other is read as a sandbox's, the
 * lower limit.  Whether Connect calls (Stripe-Account) count against the
 * platform is not documented: they are counted against it (tenant_unit
 * false) unless settings.rate_limit_scope says "tenant".  The endpoint is
 * the collection: GET /v1/events, /v1/subscriptions/{id} and its list are
 * /v1/events and /v1/subscriptions.  Evenly spaced, as Stripe counts each
 * second.
 */
static void
stripe_pace(const WiSource *src, const char *path, WiPace *out, bool *tenant_unit)
{
	bool		live = src->api_token != NULL &&
		(strncmp(src->api_token, "sk_live_", 8) == 0 || strncmp(src->api_token, "rk_live_", 8) == 0);
	const char *p = path;
	int			slashes = 0;
	size_t		n = 0;

	out->units[0].rate = live ? 100 : 25;
	out->units[0].burst = 1;
	/* "/v1/{collection}": up to the third slash or the query */
	while (p[n] != '\0' && p[n] != '?' && !(p[n] == '/' && ++slashes == 3))
		n++;
	snprintf(out->units[1].key, WI_PACE_KEY_LEN, "%.*s", (int) Min(n, WI_PACE_KEY_LEN - 1), p);
	out->units[1].rate = 25;
	out->units[1].burst = 1;
	*tenant_unit = false;
}

/*
 * What a Stripe source cannot see: events older than the events list keeps
 * (the incremental layer then needs a full pass), and a connected account
 * that deauthorized the platform (account.application.deauthorized): its
 * objects answer "No such ..." to the platform's key without being gone.
 */
static const WiHorizon stripe_horizons[] = {
	{"*", WI_HORIZON_EVENTS, STRIPE_EVENTS_WINDOW_S / 86400, NULL, NULL,
	"GET /v1/events lists the last 30 days of events only; older changes are compared by a full pass."},
	{"*", WI_HORIZON_TENANT, 0, NULL, NULL,
	"A connected account that deauthorized the platform: its objects are no longer readable with the platform's key."},
	{NULL}
};

const WiAdapter wi_adapter_stripe = {
	.kind = "stripe",
	.type_map = stripe_type_map,
	.object_url = stripe_object_url,
	.list_url = stripe_list_url,
	.auth_header = stripe_auth_header,
	.events_url = stripe_events_url,
	.events_window_s = STRIPE_EVENTS_WINDOW_S,
	.scope_headers = stripe_scope_headers,
	.tenants_url = stripe_tenants_url,
	.pace = stripe_pace,
	.horizons = stripe_horizons,
};
