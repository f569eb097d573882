/*
 * credentials.h
 *		The one interface the worker's reads (fetch, sweeps, effects) ask for
 *		a tenant's credentials (credentials.c).
 */
#ifndef WI_CREDENTIALS_H
#define WI_CREDENTIALS_H

#include "postgres.h"

#include "provider.h"

struct curl_slist;

typedef enum WiAuthStatus
{
	WI_AUTH_NONE,				/* no tenant credentials: the source's own api_token */
	WI_AUTH_OK,					/* *header is what to send */
	WI_AUTH_WAIT,				/* none usable yet (none set, expired, provider
								 * unreachable): keep the work, try later */
	WI_AUTH_FLAGGED,			/* disabled, or refused by the provider (a
								 * suspended or removed installation): a queue
								 * row for engineering, never a deletion */
	WI_AUTH_UNKNOWN				/* none, and none will come: the tenant has had
								 * no credentials for longer than
								 * webhook_inbox.tenant_credentials_wait, and
								 * nothing mints them; its work is set aside */
} WiAuthStatus;

/* flags of wi_tenant_auth */
#define WI_AUTH_FRESH	0x01	/* skip a cached token: mint a new one */

/*
 * The credentials of a read made for tenant of the source: on WI_AUTH_OK,
 * *header is a palloc'd "Name: value" line (a fetch's WiHttpRequest.auth);
 * on WAIT and FLAGGED, *reason a palloc'd sentence for the queue (no
 * secret).  Needs a transaction; may POST to the provider's token endpoint
 * (a blocking request bounded by webhook_inbox.http_timeout) and writes the
 * token it obtains, encrypted.  Runs in a subtransaction: credentials that
 * cannot be read (no key file, another key, an altered value) are this
 * tenant's WI_AUTH_WAIT with the error as *reason and a WARNING, never an
 * ERROR that would end the caller's work for other tenants.
 */
extern WiAuthStatus wi_tenant_auth(int32 source_id, const char *tenant, int flags,
								   char **header, char **reason);

/*
 * A read for tenant sent refused_header and was answered 401: returns what
 * to retry with, as wi_tenant_auth does.  A GitHub installation token is
 * minted again, once: when the token minted after a refusal is refused
 * too, or the credentials were not minted (a shop's token), the tenant is
 * flagged (WI_AUTH_FLAGGED).  When another read already replaced the token,
 * the new one is returned without a request.
 */
extern WiAuthStatus wi_tenant_auth_refused(int32 source_id, const char *tenant,
										   const char *refused_header, char **header,
										   char **reason);

/* The same, appending the header to *headers (a libcurl list). */
extern WiAuthStatus wi_tenant_auth_headers(int32 source_id, const char *tenant, int flags,
										   struct curl_slist **headers, char **reason);

/* Flags the tenant for engineering with reason (no secret in it). */
extern void wi_tenant_flag(int32 source_id, const char *tenant, const char *reason);

/*
 * adapters/github.c: the Authorization header of a read of src made for
 * tenant (an installation id of a GitHub App source; "" or any tenant of a
 * plain source gets the source's api_token), with *status and *reason as
 * wi_tenant_auth gives them.  NULL unless *status is NONE or OK.
 */
extern char *wi_github_tenant_auth_header(const WiSource *src, const char *tenant, int flags,
										  WiAuthStatus *status, char **reason);

/*
 * adapters/github.c: whether the source is a GitHub App (needs a
 * transaction), and the first page of an installation's repositories.
 */
extern bool wi_github_is_app(int32 source_id);
extern char *wi_github_repositories_url(const WiSource *src);

/*
 * adapters/github.c: a GitHub App's installations (GET /app/installations)
 * into webhook_inbox.tenants: one source (-1: it is no GitHub App), or in
 * the worker every GitHub App source.
 */
extern int	wi_github_discover(const WiSteps *steps, int32 source_id, char **error);
extern void wi_github_discover_due(const WiSteps *steps);

/*
 * credentials.c: "Authorization: Bearer <JWT>" of a GitHub App source, to
 * authenticate as the app; needs a transaction, raises without a usable key.
 */
extern char *wi_github_app_jwt_header(int32 source_id);

#endif							/* WI_CREDENTIALS_H */
