/*
 * scope.c
 *		Scoping a provider request to a tenant: the adapter's scope headers
 *		(Stripe-Account, …), and for a tenant at an origin of its own (a
 *		Shopify app's shop) the tenant's URL and credentials.  It sits above
 *		the adapters and credentials.c and calls both; neither calls back.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/snapmgr.h"

#include "credentials.h"
#include "provider.h"

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
	else if (status == WI_AUTH_UNKNOWN)
		req->auth_wait = psprintf("unknown_tenant: %s", reason ? reason : "the tenant has no credentials");
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

/*
 * See provider.h.  The account's unit is the source's ("platform": a
 * Stripe platform's Connect calls count against the platform, the safe
 * reading of Stripe's docs) or the tenant's ("tenant:" and its id: a
 * Shopify shop, a GitHub installation), as the adapter says unless
 * settings.rate_limit_scope does; an endpoint's unit is counted within the
 * account's.  settings.rate_limit and endpoint_rate_limit replace the
 * adapter's rates, evenly spaced (burst 1).
 */
void
wi_request_pace(WiPace *out, const WiAdapter *adapter, const WiSource *src, const char *tenant,
				const char *url)
{
	const char *path = url ? url : "";
	bool		tenant_unit = false;
	char		account[WI_PACE_KEY_LEN];
	char		endpoint[WI_PACE_KEY_LEN];

	memset(out, 0, sizeof(*out));
	if (tenant == NULL)
		tenant = "";
	/* the path past the origin: api_base's, or a tenant's own (a shop's) */
	if (src->api_base && strncmp(path, src->api_base, strlen(src->api_base)) == 0)
		path += strlen(src->api_base);
	else if (strstr(path, "://") != NULL)
	{
		const char *p = strstr(path, "://") + 3;

		path = strchr(p, '/') ? strchr(p, '/') : "";
	}
	if (adapter->pace != NULL)
		adapter->pace(src, path, out, &tenant_unit);
	if (src->rate_limit_scope != NULL)
		tenant_unit = strcmp(src->rate_limit_scope, "tenant") == 0;
	if (src->rate_limit > 0)
	{
		out->units[0].rate = src->rate_limit;
		out->units[0].burst = 1;
	}
	if (src->endpoint_rate_limit > 0)
	{
		out->units[1].rate = src->endpoint_rate_limit;
		out->units[1].burst = 1;
		if (out->units[1].key[0] == '\0')
			strlcpy(out->units[1].key, "*", WI_PACE_KEY_LEN);
	}
	if (tenant_unit)
		snprintf(account, sizeof(account), "tenant:%s", tenant);
	else
		strlcpy(account, "platform", sizeof(account));
	strlcpy(endpoint, out->units[1].key, sizeof(endpoint));
	/* a unit the adapter does not pace and the settings do not either: none */
	strlcpy(out->units[0].key, account, WI_PACE_KEY_LEN);
	if (endpoint[0] != '\0' && out->units[1].rate > 0)
		snprintf(out->units[1].key, WI_PACE_KEY_LEN, "%s %s", account, endpoint);
	else
		out->units[1].key[0] = '\0';
	if (out->units[0].rate <= 0 && adapter->pace == NULL)
		out->units[0].key[0] = '\0';
}
