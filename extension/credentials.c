/*
 * credentials.c
 *		Credentials per tenant: what a read for (source, tenant) sends, a
 *		GitHub App's installation tokens minted and cached, and the SQL
 *		functions that expose them to tests.
 *
 * The rules are in SQL (sql/credentials.sql: _tenant_auth_plan() decides,
 * _tenant_token_answer() keeps GitHub's answer); this file does what SQL
 * cannot: sign the app's JWT (jwt.c) and make the token request.  The
 * request is a blocking libcurl easy transfer with the worker's defaults
 * (webhook_inbox.http_timeout bounds it, so a SIGTERM waits at most that
 * long), sent only after the same origin check as every provider request:
 * the token endpoint is on the source's api_base.
 *
 * GitHub's contract ("Authenticating as a GitHub App installation"):
 * POST {api_base}/app/installations/{installation_id}/access_tokens with
 * Authorization: Bearer <JWT>, Accept: application/vnd.github+json and
 * X-GitHub-Api-Version: 2022-11-28 answers 201 {token, expires_at, ...};
 * the token lasts an hour and goes in Authorization: Bearer (or token).
 *
 * A Shopify app's shops with expiring offline tokens are refreshed here
 * too (shop_refresh()), one refresh per shop at a time across backends.
 */
#include "postgres.h"

#include <time.h>

#include <curl/curl.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "credentials.h"
#include "jwt.h"
#include "outbound.h"
#include "webhook_inbox.h"

#define WI_TOKEN_MAX_BODY	(1024 * 1024)

static size_t
token_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	StringInfo	b = (StringInfo) userdata;
	size_t		n = size * nmemb;

	if ((size_t) b->len + n > WI_TOKEN_MAX_BODY)
		return 0;
	appendBinaryStringInfo(b, ptr, (int) n);
	return n;
}

static char *copy_col(HeapTuple tup, TupleDesc desc, int col, MemoryContext cxt);
static WiAuthStatus status_of(const char *action);

/*
 * POSTs body (JSON) to url with the extra headers (each "Name: value", a
 * NULL-terminated list), after the same origin check as every provider
 * request; returns the HTTP status with the answer in *answer, or 0 with
 * the transport failure or refusal (no secret) in *answer.  The headers and
 * body may hold secrets: the caller wipes them.
 */
static long
token_post(const char *url, const char *origin, const char *const *extra, const char *body,
		   StringInfo answer)
{
	void	   *parsed = NULL;
	char	   *refusal;
	CURL	   *h = NULL;
	struct curl_slist *volatile headers = NULL;
	char		errbuf[CURL_ERROR_SIZE];
	volatile long status = 0;
	CURLcode	rc;

	/* a paused copy mints and refreshes nothing */
	refusal = wi_outbound_gate();
	if (refusal != NULL)
	{
		appendStringInfo(answer, "not sent: %s", refusal);
		return 0;
	}
	refusal = wi_http_refusal(url, origin, &parsed);
	if (refusal != NULL)
	{
		appendStringInfo(answer, "refused: %s", refusal);
		return 0;
	}
	h = curl_easy_init();
	if (h == NULL)
	{
		curl_url_cleanup((CURLU *) parsed);
		elog(ERROR, "webhook_inbox: curl_easy_init failed");
	}
	PG_TRY();
	{
		for (int i = 0; extra[i] != NULL; i++)
			headers = curl_slist_append(headers, extra[i]);
		headers = curl_slist_append(headers, "Content-Type: application/json");
		headers = curl_slist_append(headers, "Expect:");
		if (headers == NULL)
			elog(ERROR, "webhook_inbox: out of memory for request headers");
		wi_curl_defaults(h);
		curl_easy_setopt(h, CURLOPT_CURLU, parsed);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, token_write_cb);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
		errbuf[0] = '\0';
		rc = curl_easy_perform(h);
		if (rc == CURLE_OK)
		{
			long		code = 0;

			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
			status = code;
		}
		else
		{
			resetStringInfo(answer);
			appendStringInfoString(answer, errbuf[0] ? errbuf : curl_easy_strerror(rc));
		}
	}
	PG_FINALLY();
	{
		curl_easy_cleanup(h);
		if (headers != NULL)
		{
			for (struct curl_slist *l = headers; l != NULL; l = l->next)
				explicit_bzero(l->data, strlen(l->data));
		}
		curl_slist_free_all(headers);
		curl_url_cleanup((CURLU *) parsed);
	}
	PG_END_TRY();
	return status;
}

/*
 * POSTs for an installation token; returns the HTTP status with the answer
 * in *body, or 0 with the transport failure (no secret) in *body.
 */
static long
token_request(const char *api_base, const char *installation, const char *jwt, StringInfo body)
{
	char	   *url = psprintf("%s/app/installations/%s/access_tokens", api_base, installation);
	char	   *auth = psprintf("Authorization: Bearer %s", jwt);
	const char *const extra[] = {auth, "Accept: application/vnd.github+json",
	"X-GitHub-Api-Version: 2022-11-28", NULL};
	long		status;

	status = token_post(url, api_base, extra, "{}", body);
	explicit_bzero(auth, strlen(auth));
	return status;
}

/*
 * A Shopify app's shop whose expiring offline token is due, as
 * @shopify/shopify-api's refreshToken() does it: POST
 * https://{shop}/admin/oauth/access_token with Content-Type and Accept
 * application/json and {client_id, client_secret, refresh_token,
 * grant_type: "refresh_token"}; 200 answers {access_token, expires_in,
 * refresh_token, refresh_token_expires_in, scope}.  Shopify replaces the
 * refresh token on every use, so the refresh is serialised per shop:
 * _shop_refresh_begin() locks the shop's credentials row until the
 * caller's transaction ends, and a backend that waited for it finds the
 * token its winner saved.  The new access token and the rotated refresh
 * token are saved by one UPDATE (_shop_refresh_answer()) in that same
 * transaction.  Called without SPI connected.
 */
static WiAuthStatus
shop_refresh(int32 source_id, const char *tenant, char **header, char **reason)
{
	MemoryContext cxt = CurrentMemoryContext;
	WiSource   *src = wi_source_load(source_id);
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		args[2] = {Int32GetDatum(source_id), CStringGetTextDatum(tenant)};
	HeapTuple	tup;
	TupleDesc	desc;
	char	   *action;
	char	   *body;
	char	   *base;
	char	   *origin;
	char	   *why;
	StringInfoData answer;
	long		status;
	WiAuthStatus result;
	int			rc;

	*header = NULL;
	*reason = NULL;
	if (src == NULL)
	{
		*reason = psprintf("source %d does not exist", source_id);
		return WI_AUTH_WAIT;
	}
	base = wi_shopify_shop_base(src, tenant, &origin, &why);
	if (base == NULL)
	{
		*reason = why;
		return WI_AUTH_FLAGGED;
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	rc = SPI_execute_with_args("SELECT action, header, body, reason "
							   "FROM webhook_inbox._shop_refresh_begin($1, $2)",
							   2, types, args, NULL, false, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "webhook_inbox: reading a shop's refresh token failed: %s", SPI_result_code_string(rc));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	action = SPI_getvalue(tup, desc, 1);
	if (action == NULL || strcmp(action, "refresh") != 0)
	{
		/* another backend refreshed it while this one waited, or none is possible */
		result = status_of(action);
		*header = copy_col(tup, desc, 2, cxt);
		*reason = copy_col(tup, desc, 4, cxt);
		SPI_finish();
		return result;
	}
	body = SPI_getvalue(tup, desc, 3);
	initStringInfo(&answer);
	{
		const char *const extra[] = {"Accept: application/json", NULL};

		status = token_post(psprintf("%s/admin/oauth/access_token", base), origin, extra, body, &answer);
	}
	explicit_bzero(body, strlen(body));
	{
		Oid			atypes[4] = {INT4OID, TEXTOID, INT4OID, TEXTOID};
		Datum		aargs[4] = {args[0], args[1], Int32GetDatum((int32) status),
		CStringGetTextDatum(answer.data)};

		rc = SPI_execute_with_args("SELECT action, header, reason "
								   "FROM webhook_inbox._shop_refresh_answer($1, $2, $3, $4)",
								   4, atypes, aargs, NULL, false, 1);
	}
	explicit_bzero(answer.data, answer.len);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "webhook_inbox: keeping a shop's refreshed token failed: %s", SPI_result_code_string(rc));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	result = status_of(SPI_getvalue(tup, desc, 1));
	*header = copy_col(tup, desc, 2, cxt);
	*reason = copy_col(tup, desc, 3, cxt);
	SPI_finish();
	if (result == WI_AUTH_OK)
		ereport(DEBUG1, (errmsg("webhook_inbox: refreshed the access token of shop \"%s\"", tenant)));
	return result;
}

static char *
copy_col(HeapTuple tup, TupleDesc desc, int col, MemoryContext cxt)
{
	char	   *v = SPI_getvalue(tup, desc, col);

	return v ? MemoryContextStrdup(cxt, v) : NULL;
}

/*
 * Run sql, a SELECT of one row, inside SPI and return that row (its
 * descriptor in *desc); raises, naming what was being done, when it does not
 * give exactly one row.
 */
static HeapTuple
one_row(const char *sql, int nargs, Oid *types, Datum *args, bool read_only,
		const char *what, TupleDesc *desc)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, args, NULL, read_only, 1);

	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "webhook_inbox: %s failed: %s", what, SPI_result_code_string(rc));
	*desc = SPI_tuptable->tupdesc;
	return SPI_tuptable->vals[0];
}

static WiAuthStatus
status_of(const char *action)
{
	if (action == NULL)
		elog(ERROR, "webhook_inbox: credentials plan without an action");
	if (strcmp(action, "ok") == 0)
		return WI_AUTH_OK;
	if (strcmp(action, "wait") == 0)
		return WI_AUTH_WAIT;
	if (strcmp(action, "flagged") == 0)
		return WI_AUTH_FLAGGED;
	if (strcmp(action, "none") == 0)
		return WI_AUTH_NONE;
	if (strcmp(action, "unknown") == 0)
		return WI_AUTH_UNKNOWN;
	elog(ERROR, "webhook_inbox: unknown credentials action \"%s\"", action);
	return WI_AUTH_WAIT;		/* keep the compiler quiet */
}

/*
 * wi_tenant_auth, and wi_tenant_auth_refused's mint after a refusal
 * (after_refusal: the token replaces one a read was refused with).
 */
static WiAuthStatus
tenant_auth(int32 source_id, const char *tenant, bool fresh, bool after_refusal, char **header,
			char **reason)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			types[4] = {INT4OID, TEXTOID, BOOLOID, INT4OID};
	Datum		args[4];
	HeapTuple	tup;
	TupleDesc	desc;
	char	   *action;
	char	   *api_base;
	char	   *iss;
	char	   *key;
	char	   *jwt;
	StringInfoData body;
	long		status;
	WiAuthStatus result;

	*header = NULL;
	*reason = NULL;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	args[0] = Int32GetDatum(source_id);
	args[1] = CStringGetTextDatum(tenant);
	args[2] = BoolGetDatum(fresh);
	tup = one_row("SELECT action, header, api_base, iss, private_key, reason "
				  "FROM webhook_inbox._tenant_auth_plan($1, $2, $3)",
				  3, types, args, false, "reading credentials", &desc);
	action = SPI_getvalue(tup, desc, 1);
	if (action != NULL && strcmp(action, "refresh") == 0)
	{
		/* a shop's expiring token: refreshed under its row's lock */
		SPI_finish();
		return shop_refresh(source_id, tenant, header, reason);
	}
	if (action == NULL || strcmp(action, "mint") != 0)
	{
		result = status_of(action);
		*header = copy_col(tup, desc, 2, cxt);
		*reason = copy_col(tup, desc, 6, cxt);
		SPI_finish();
		return result;
	}

	/* a GitHub App installation without a usable token: mint one */
	api_base = SPI_getvalue(tup, desc, 3);
	iss = SPI_getvalue(tup, desc, 4);
	key = SPI_getvalue(tup, desc, 5);
	jwt = wi_jwt_rs256(key, iss, (int64) time(NULL));
	explicit_bzero(key, strlen(key));
	initStringInfo(&body);
	status = token_request(api_base, tenant, jwt, &body);
	explicit_bzero(jwt, strlen(jwt));

	{
		Oid			atypes[5] = {INT4OID, TEXTOID, INT4OID, TEXTOID, BOOLOID};
		Datum		aargs[5] = {args[0], args[1], Int32GetDatum((int32) status),
		CStringGetTextDatum(body.data), BoolGetDatum(after_refusal)};

		tup = one_row("SELECT action, header, reason "
					  "FROM webhook_inbox._tenant_token_answer($1, $2, $3, $4, $5)",
					  5, atypes, aargs, false, "keeping the installation token", &desc);
	}
	result = status_of(SPI_getvalue(tup, desc, 1));
	*header = copy_col(tup, desc, 2, cxt);
	*reason = copy_col(tup, desc, 3, cxt);
	SPI_finish();
	return result;
}

static WiAuthStatus tenant_auth_refused(int32 source_id, const char *tenant,
										const char *refused_header, char **header, char **reason);

/*
 * Runs one of the two in a subtransaction: an error reading one tenant's
 * credentials (a missing key file, a value that does not authenticate, a
 * corrupt row) is that tenant's WI_AUTH_WAIT with the message as its reason
 * and a WARNING, never the end of the caller's round for every other
 * tenant.  A cancel, a shutdown or running out of memory is raised again.
 */
static WiAuthStatus
guarded(int32 source_id, const char *tenant, bool fresh, const char *refused_header,
		char **header, char **reason)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile WiAuthStatus result = WI_AUTH_WAIT;

	*header = NULL;
	*reason = NULL;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		if (refused_header != NULL)
			result = tenant_auth_refused(source_id, tenant, refused_header, header, reason);
		else
			result = tenant_auth(source_id, tenant, fresh, false, header, reason);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED || edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			edata->sqlerrcode == ERRCODE_OUT_OF_MEMORY)
			ReThrowError(edata);
		*header = NULL;
		*reason = psprintf("the credentials of tenant %s could not be read: %s", tenant, edata->message);
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("webhook_inbox: the credentials of source %d, tenant \"%s\" could not be read: %s",
						source_id, tenant, edata->message),
				 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
				 edata->hint ? errhint("%s", edata->hint) : 0));
		FreeErrorData(edata);
		result = WI_AUTH_WAIT;
	}
	PG_END_TRY();
	return result;
}

WiAuthStatus
wi_tenant_auth(int32 source_id, const char *tenant, int flags, char **header, char **reason)
{
	return guarded(source_id, tenant, (flags & WI_AUTH_FRESH) != 0, NULL, header, reason);
}

WiAuthStatus
wi_tenant_auth_refused(int32 source_id, const char *tenant, const char *refused_header,
					   char **header, char **reason)
{
	return guarded(source_id, tenant, false, refused_header ? refused_header : "", header, reason);
}

static WiAuthStatus
tenant_auth_refused(int32 source_id, const char *tenant, const char *refused_header,
					char **header, char **reason)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			types[3] = {INT4OID, TEXTOID, TEXTOID};
	Datum		args[3];
	HeapTuple	tup;
	TupleDesc	desc;
	char	   *action;
	WiAuthStatus result;

	*header = NULL;
	*reason = NULL;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	args[0] = Int32GetDatum(source_id);
	args[1] = CStringGetTextDatum(tenant);
	args[2] = CStringGetTextDatum(refused_header);
	tup = one_row("SELECT action, header, reason "
				  "FROM webhook_inbox._tenant_auth_refused($1, $2, $3)",
				  3, types, args, false, "recording a refusal", &desc);
	action = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 1));
	*header = copy_col(tup, desc, 2, cxt);
	*reason = copy_col(tup, desc, 3, cxt);
	SPI_finish();
	if (strcmp(action, "mint") != 0)
		return status_of(action);
	result = tenant_auth(source_id, tenant, true, true, header, reason);
	return result;
}

WiAuthStatus
wi_tenant_auth_headers(int32 source_id, const char *tenant, int flags,
					   struct curl_slist **headers, char **reason)
{
	char	   *header = NULL;
	WiAuthStatus status = wi_tenant_auth(source_id, tenant, flags, &header, reason);

	if (status == WI_AUTH_OK)
	{
		struct curl_slist *l = curl_slist_append(*headers, header);

		explicit_bzero(header, strlen(header));
		if (l == NULL)
			elog(ERROR, "webhook_inbox: out of memory for request headers");
		*headers = l;
	}
	return status;
}

void
wi_tenant_flag(int32 source_id, const char *tenant, const char *reason)
{
	Oid			types[3] = {INT4OID, TEXTOID, TEXTOID};
	Datum		args[3];
	int			rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	args[0] = Int32GetDatum(source_id);
	args[1] = CStringGetTextDatum(tenant);
	args[2] = CStringGetTextDatum(reason);
	rc = SPI_execute_with_args("SELECT webhook_inbox._flag_tenant($1, $2, "
							   "CASE WHEN s.settings ? 'github_app_id' THEN "
							   "CASE WHEN $2 = '' THEN 'github_app' ELSE 'github_app_installation' END "
							   "ELSE coalesce((SELECT kind FROM webhook_inbox.tenant_credentials "
							   "WHERE source_id = $1 AND tenant = $2), 'api_token') END, $3) "
							   "FROM webhook_inbox.sources s WHERE s.id = $1",
							   3, types, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "webhook_inbox: flagging a tenant failed: %s", SPI_result_code_string(rc));
	SPI_finish();
}

/*
 * The "Authorization: Bearer <JWT>" a GitHub App source authenticates as
 * the app with (GET /app/installations), signed now with its key.  Needs
 * a transaction; raises when the source is no GitHub App, has no key, or
 * its key was disabled or flagged (tenant_credentials_status says which).
 */
char *
wi_github_app_jwt_header(int32 source_id)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(source_id)};
	char	   *iss;
	char	   *key;
	char	   *status;
	char	   *jwt;
	char	   *header;
	int			rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	rc = SPI_execute_with_args("SELECT g.iss, g.private_key, c.status || coalesce(': ' || c.status_reason, '') "
							   "FROM webhook_inbox.sources s "
							   "CROSS JOIN LATERAL webhook_inbox._github_app_signing(s.name) g "
							   "JOIN webhook_inbox.tenant_credentials c ON c.source_id = s.id AND c.tenant = '' "
							   "WHERE s.id = $1",
							   1, types, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source %d has no GitHub App key", source_id)));
	iss = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	key = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
	if (status == NULL || strncmp(status, "active", 6) != 0)
	{
		explicit_bzero(key, strlen(key));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("the GitHub App's key is %s", status ? status : "unknown")));
	}
	jwt = wi_jwt_rs256(key, iss, (int64) time(NULL));
	explicit_bzero(key, strlen(key));
	header = MemoryContextStrdup(cxt, psprintf("Authorization: Bearer %s", jwt));
	explicit_bzero(jwt, strlen(jwt));
	SPI_finish();
	return header;
}

PG_FUNCTION_INFO_V1(wi_tenant_auth_sql);
PG_FUNCTION_INFO_V1(wi_tenant_reauth_sql);
PG_FUNCTION_INFO_V1(wi_github_app_jwt_sql);
PG_FUNCTION_INFO_V1(wi_private_key_bits);

/* (status, header, reason) of a WiAuthStatus, for the SQL functions */
static Datum
auth_row(FunctionCallInfo fcinfo, WiAuthStatus status, char *header, char *reason)
{
	static const char *const names[] = {"none", "ok", "wait", "flagged", "unknown"};
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "webhook_inbox: a credentials function must return a row");
	values[0] = CStringGetTextDatum(names[status]);
	if (header)
		values[1] = CStringGetTextDatum(header);
	else
		nulls[1] = true;
	if (reason)
		values[2] = CStringGetTextDatum(reason);
	else
		nulls[2] = true;
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}

/* _tenant_auth(source_id, tenant, fresh) → (status, header, reason) */
Datum
wi_tenant_auth_sql(PG_FUNCTION_ARGS)
{
	char	   *header;
	char	   *reason;
	WiAuthStatus status;

	status = wi_tenant_auth(PG_GETARG_INT32(0), text_to_cstring(PG_GETARG_TEXT_PP(1)),
							PG_GETARG_BOOL(2) ? WI_AUTH_FRESH : 0, &header, &reason);
	PG_RETURN_DATUM(auth_row(fcinfo, status, header, reason));
}

/* _tenant_reauth(source_id, tenant, refused_header) → (status, header, reason) */
Datum
wi_tenant_reauth_sql(PG_FUNCTION_ARGS)
{
	char	   *header;
	char	   *reason;
	WiAuthStatus status;

	status = wi_tenant_auth_refused(PG_GETARG_INT32(0), text_to_cstring(PG_GETARG_TEXT_PP(1)),
									text_to_cstring(PG_GETARG_TEXT_PP(2)), &header, &reason);
	PG_RETURN_DATUM(auth_row(fcinfo, status, header, reason));
}

/* _github_app_jwt(source) → the JWT the worker would send now */
Datum
wi_github_app_jwt_sql(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {PG_GETARG_DATUM(0)};
	HeapTuple	tup;
	TupleDesc	desc;
	char	   *iss;
	char	   *key;
	char	   *jwt;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "webhook_inbox: SPI_connect failed");
	tup = one_row("SELECT iss, private_key FROM webhook_inbox._github_app_signing($1)",
				  1, types, args, true, "reading the app's key", &desc);
	iss = SPI_getvalue(tup, desc, 1);
	key = SPI_getvalue(tup, desc, 2);
	jwt = MemoryContextStrdup(cxt, wi_jwt_rs256(key, iss, (int64) time(NULL)));
	explicit_bzero(key, strlen(key));
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(jwt));
}

/* _private_key_bits(pem) → bits, or an error saying what is wrong */
Datum
wi_private_key_bits(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(wi_rsa_key_bits(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}
