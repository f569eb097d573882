/*
 * fetch.c
 *		Provider requests with libcurl's multi interface: many GETs (or
 *		POSTs of a query, for GraphQL read APIs) in flight
 *		at once, bounded by a concurrency limit and a per-request gate
 *		(rate limits), while the worker still notices SIGTERM.
 *
 * The caller owns the requests; this file owns the curl handles and frees
 * them whatever happens, an ERROR thrown by the caller's completion
 * callback included.  The effects' requests, one at a time and waited for,
 * go out here too (wi_http_send()), so libcurl is set up in one place.  Responses are kept whole in memory (bounded), since
 * they go to SQL as one text value: the C code reads no JSON.
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include <curl/curl.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "fetch.h"
#include "outbound.h"
#include "provider.h"
#include "stats.h"
#include "webhook_inbox.h"

/*
 * What every request to a provider gets, the worker's fetches and the
 * effects alike: the configured timeouts, no signals (libcurl must not touch
 * them in a PostgreSQL process), no redirects, http and https only.
 */
void
wi_curl_defaults(void *handle)
{
	CURL	   *h = (CURL *) handle;

	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long) wi_http_timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long) Min(wi_http_timeout_ms, 5000));
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "webhook_inbox/" EXTVERSION);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
}

#define WI_HTTP_MAX_BODY	(16 * 1024 * 1024)	/* larger answers are errors */
#define WI_HTTP_POLL_MS		50	/* how often SIGTERM is looked at */
#define WI_HTTP_PACE_POLL_MS 2	/* how often a paced request is asked again */

static CURLM *multi = NULL;

void
wi_http_ensure(void)
{
	static bool global_done = false;

	if (!global_done)
	{
		if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK)
			elog(ERROR, "webhook_inbox: curl_global_init failed");
		global_done = true;
	}
	if (multi == NULL && (multi = curl_multi_init()) == NULL)
		elog(ERROR, "webhook_inbox: curl_multi_init failed");
}

/* Frees the process's curl state (at worker exit). */
void
wi_http_cleanup(void)
{
	if (multi != NULL)
		curl_multi_cleanup(multi);
	multi = NULL;
}

void
wi_http_init_request(WiHttpRequest *req, char *url, char *auth, int32 source_id,
					 const char *origin, void *arg)
{
	memset(req, 0, sizeof(*req));
	req->url = url;
	req->auth = auth;
	req->source_id = source_id;
	req->origin = origin;
	req->arg = arg;
	req->retry_after_s = -1;
	req->ratelimit_remaining = -1;
	req->ratelimit_reset = -1;
	req->credentials = "";
	initStringInfo(&req->body);
}

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	WiHttpRequest *req = (WiHttpRequest *) userdata;
	size_t		n = size * nmemb;

	/* returning less than n aborts the transfer with CURLE_WRITE_ERROR */
	if ((size_t) req->body.len + n > WI_HTTP_MAX_BODY)
		return 0;
	appendBinaryStringInfo(&req->body, ptr, (int) n);
	return n;
}

/*
 * Keeps the rel="next" target of a Link header: Shopify and GitHub page
 * their lists that way.  A header may hold several links separated by
 * commas, each "<url>; rel=..." with other parameters possible.
 */
static size_t
header_cb(char *buffer, size_t size, size_t nitems, void *userdata)
{
	WiHttpRequest *req = (WiHttpRequest *) userdata;
	size_t		n = size * nitems;
	char	   *line;
	char	   *p;

	/* GitHub's rate limit: how many requests are left, and when the window resets */
	if ((n > 22 && pg_strncasecmp(buffer, "x-ratelimit-remaining:", 22) == 0) ||
		(n > 18 && pg_strncasecmp(buffer, "x-ratelimit-reset:", 18) == 0))
	{
		bool		remaining = pg_strncasecmp(buffer, "x-ratelimit-remaining:", 22) == 0;
		char	   *v = pnstrdup(buffer + (remaining ? 22 : 18), n - (remaining ? 22 : 18));
		char	   *end;
		long long	x;

		errno = 0;
		x = strtoll(v, &end, 10);
		while (*end == ' ' || *end == '\r' || *end == '\n' || *end == '\t')
			end++;
		if (errno == 0 && end != v && *end == '\0' && x >= 0)
		{
			if (remaining)
				req->ratelimit_remaining = (int64) x;
			else
				req->ratelimit_reset = (int64) x;
		}
		pfree(v);
		return n;
	}
	if (n < 5 || pg_strncasecmp(buffer, "link:", 5) != 0)
		return n;
	line = pnstrdup(buffer + 5, n - 5);
	for (p = strchr(line, '<'); p != NULL;)
	{
		char	   *end = strchr(p, '>');
		char	   *next;
		char	   *params;

		if (end == NULL)
			break;
		*end = '\0';
		params = end + 1;
		next = strchr(params, '<');
		if (next)
			next[-1] = '\0';
		if (strstr(params, "rel=\"next\"") != NULL || strstr(params, "rel=next") != NULL)
		{
			req->link_next = pstrdup(p + 1);
			break;
		}
		p = next;
	}
	pfree(line);
	return n;
}

/* scheme://host:port of a parsed URL, for messages (never its path or user) */
static char *
origin_text(CURLU *u)
{
	char	   *scheme = NULL;
	char	   *host = NULL;
	char	   *port = NULL;
	char	   *out;

	curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
	curl_url_get(u, CURLUPART_HOST, &host, 0);
	curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
	out = psprintf("%s://%s:%s", scheme ? scheme : "?", host ? host : "?", port ? port : "?");
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	return out;
}

/* true when part of a and b are both present and equal (case-insensitively) */
static bool
same_part(CURLU *a, CURLU *b, CURLUPart part, unsigned int flags)
{
	char	   *x = NULL;
	char	   *y = NULL;
	bool		same;

	curl_url_get(a, part, &x, flags);
	curl_url_get(b, part, &y, flags);
	same = x != NULL && y != NULL && pg_strcasecmp(x, y) == 0;
	curl_free(x);
	curl_free(y);
	return same;
}

/*
 * The one check every provider request passes before it leaves (fetches,
 * list pages, a list's Link rel="next", effects): url must name the same
 * scheme, host and port as origin (the source's api_base) and carry no user
 * name, password or login options, so that the source's token can only ever
 * go to the source ("https://api.example.com@elsewhere/" names the host
 * elsewhere).  Both are parsed by libcurl, and the transfer is then made
 * from that same parse (*parsed, a CURLU to hand to CURLOPT_CURLU and free
 * with curl_url_cleanup), so what was checked is what is sent.
 *
 * Returns NULL when the request may go, or a palloc'd reason (naming only
 * schemes, hosts and ports) when it must not; *parsed is then NULL.
 */
char *
wi_http_refusal(const char *url, const char *origin, void **parsed)
{
	CURLU	   *u = curl_url();
	CURLU	   *o = curl_url();
	char	   *part = NULL;
	char	   *reason = NULL;

	*parsed = NULL;
	if (u == NULL || o == NULL)
		reason = pstrdup("could not allocate a URL parser");
	else if (origin == NULL || curl_url_set(o, CURLUPART_URL, origin, 0) != CURLUE_OK)
		reason = pstrdup("the source has no valid api_base");
	else if (url == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
		reason = pstrdup("the URL does not parse");
	else if (curl_url_get(u, CURLUPART_USER, &part, 0) == CURLUE_OK ||
			 curl_url_get(u, CURLUPART_PASSWORD, &part, 0) == CURLUE_OK ||
			 curl_url_get(u, CURLUPART_OPTIONS, &part, 0) == CURLUE_OK)
		reason = psprintf("the URL to %s carries a user name or password", origin_text(u));
	else if (!same_part(u, o, CURLUPART_SCHEME, 0) ||
			 !same_part(u, o, CURLUPART_HOST, 0) ||
			 !same_part(u, o, CURLUPART_PORT, CURLU_DEFAULT_PORT))
		reason = psprintf("%s is not the source's api_base origin %s", origin_text(u), origin_text(o));
	curl_free(part);
	if (o)
		curl_url_cleanup(o);
	if (reason != NULL)
	{
		if (u)
			curl_url_cleanup(u);
		return psprintf("refused: %s", reason);
	}
	*parsed = u;
	return NULL;
}

/*
 * Starts a transfer, or refuses it (false, with req->refused and the reason
 * in req->error) when wi_http_refusal() says its URL is not the source's.
 */
static bool
start_request(WiHttpRequest *req)
{
	CURL	   *h;
	struct curl_slist *headers = NULL;
	void	   *parsed;
	char	   *reason;

	/* a tenant's request without the tenant's credentials never leaves */
	if (req->auth_wait != NULL)
	{
		req->status = 0;
		req->error = req->auth_wait;
		return false;
	}
	/* nor does any while outbound work is paused */
	reason = wi_outbound_gate();
	if (reason != NULL)
	{
		req->status = 0;
		req->error = reason;
		return false;
	}
	reason = wi_http_refusal(req->url, req->origin, &parsed);
	if (reason != NULL)
	{
		req->refused = true;
		req->status = 0;
		req->error = reason;
		wi_stat_add(WI_STAT_REFUSED, 1);
		ereport(WARNING,
				(errmsg("webhook_inbox: a request for source %d was not sent", req->source_id),
				 errdetail("%s", reason)));
		return false;
	}
	req->parsed = parsed;
	h = curl_easy_init();
	if (h == NULL)
		elog(ERROR, "webhook_inbox: curl_easy_init failed");
	headers = curl_slist_append(headers, "Accept: application/json");
	if (req->post_body)
		headers = curl_slist_append(headers, "Content-Type: application/json");
	if (req->auth)
		headers = curl_slist_append(headers, req->auth);
	for (int i = 0; i < WI_MAX_SCOPE_HEADERS && req->scope[i] != NULL; i++)
		headers = curl_slist_append(headers, req->scope[i]);
	req->headers = headers;
	req->handle = h;
	req->started = true;
	req->started_at = GetCurrentTimestamp();

	curl_easy_setopt(h, CURLOPT_CURLU, parsed);
	curl_easy_setopt(h, CURLOPT_PRIVATE, req);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, req);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, req);
	if (req->post_body)
	{
		/* a read API that takes its question as a body (GraphQL) */
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long) strlen(req->post_body));
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->post_body);
	}
	wi_curl_defaults(h);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	if (curl_multi_add_handle(multi, h) != CURLM_OK)
		elog(ERROR, "webhook_inbox: curl_multi_add_handle failed");
	return true;
}

static void
release_handle(WiHttpRequest *req)
{
	if (req->handle == NULL)
		return;
	curl_multi_remove_handle(multi, (CURL *) req->handle);
	curl_easy_cleanup((CURL *) req->handle);
	curl_slist_free_all(req->headers);
	if (req->parsed)
		curl_url_cleanup((CURLU *) req->parsed);
	req->handle = NULL;
	req->headers = NULL;
	req->parsed = NULL;
}

static void
finish_request(WiHttpRequest *req, CURLcode result)
{
	CURL	   *h = (CURL *) req->handle;
	long		code = 0;
	curl_off_t	total_us = 0;
	curl_off_t	retry_after = -1;

	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &total_us);
	if (curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0)
		req->retry_after_s = (int64) retry_after;
	req->elapsed_ms = total_us / 1000.0;
	if (result != CURLE_OK)
	{
		req->status = 0;
		req->error = pstrdup(curl_easy_strerror(result));
	}
	else
		req->status = code;
	release_handle(req);
}

/*
 * Runs the requests, at most concurrency at a time.  gate (optional) is
 * asked before each start and may hold a request back (WAIT) or drop it
 * (SKIP, having dealt with it itself); done (optional) is called as each
 * transfer ends, with status, body, Link and Retry-After filled in.
 *
 * Returns false when steps says to stop (its stop flag, set by the worker's
 * SIGTERM; without one a pending interrupt, which is then serviced): transfers in flight are abandoned and every request not
 * completed has started = false or status 0 with error "interrupted".
 * Requests the gate held back until nothing was in flight are left with
 * started = false; the caller gives them back.
 */
bool
wi_http_run(const WiSteps *steps, WiHttpRequest **reqs, int n, int concurrency,
			wi_http_gate_fn gate, wi_http_done_fn done, void *arg)
{
	volatile int inflight = 0;
	int		   *state;			/* 0 queued, 1 running, 2 finished */
	volatile bool stopped = false;

	wi_http_ensure();
	state = palloc0(sizeof(int) * Max(n, 1));

	PG_TRY();
	{
		for (;;)
		{
			int			running = 0;
			CURLMsg    *msg;
			int			left;
			int			later = 0;

			for (int i = 0; i < n; i++)
			{
				if (state[i] != 0)
					continue;
				if (inflight >= concurrency)
					break;
				switch (gate ? gate(reqs[i], arg) : WI_HTTP_START)
				{
					case WI_HTTP_START:
						if (start_request(reqs[i]))
						{
							state[i] = 1;
							inflight++;
						}
						else
						{
							/* refused: done at once, as a request that failed */
							state[i] = 2;
							if (done)
								done(reqs[i], arg);
						}
						break;
					case WI_HTTP_SKIP:
						state[i] = 2;
						break;
					case WI_HTTP_WAIT:
						break;
					case WI_HTTP_LATER:
						later++;
						break;
				}
			}
			if (inflight == 0 && later == 0)
				break;			/* all done, or only held-back requests left */

			if (wi_steps_stopping(steps))
			{
				stopped = true;
				break;
			}
			curl_multi_perform(multi, &running);
			while ((msg = curl_multi_info_read(multi, &left)) != NULL)
			{
				WiHttpRequest *req = NULL;

				if (msg->msg != CURLMSG_DONE)
					continue;
				curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &req);
				finish_request(req, msg->data.result);
				inflight--;
				for (int i = 0; i < n; i++)
					if (reqs[i] == req)
						state[i] = 2;
				if (done)
					done(req, arg);
			}
			/* a paced request is asked again soon: its slot comes within ms */
			if (inflight > 0 || later > 0)
				curl_multi_poll(multi, NULL, 0, later > 0 ? WI_HTTP_PACE_POLL_MS : WI_HTTP_POLL_MS, NULL);
		}
	}
	PG_CATCH();
	{
		for (int i = 0; i < n; i++)
			release_handle(reqs[i]);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (stopped)
	{
		for (int i = 0; i < n; i++)
			if (state[i] == 1)
			{
				release_handle(reqs[i]);
				reqs[i]->status = 0;
				reqs[i]->error = pstrdup("interrupted");
			}
		if (steps->stop_flag == NULL)
			CHECK_FOR_INTERRUPTS();
	}
	pfree(state);
	return !stopped;
}

/* A response kept up to a bound: the head of a large answer, the rest drained. */
typedef struct BoundedResponse
{
	StringInfo	buf;
	int			max;
} BoundedResponse;

static size_t
bounded_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	BoundedResponse *r = (BoundedResponse *) userdata;
	size_t		n = size * nmemb;

	if (r->buf->len < r->max)
		appendBinaryStringInfo(r->buf, ptr, Min(n, (size_t) (r->max - r->buf->len)));
	return n;
}

/*
 * Did the request possibly reach the provider?  Errors before the connection
 * was made prove it did not; everything after may have been processed.
 */
static const char *
classify_transport(CURLcode rc)
{
	switch (rc)
	{
		case CURLE_OK:
			return "ok";
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_RESOLVE_PROXY:
		case CURLE_COULDNT_CONNECT:
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_URL_MALFORMAT:
		case CURLE_UNSUPPORTED_PROTOCOL:
			return "not_sent";
		default:
			return "unknown";
	}
}

/*
 * Runs the one transfer h, added to the process's multi handle, until it
 * ends, as a blocking transfer would: nothing else is in flight
 * (wi_http_run() leaves none), and no interrupt stops it half way, since an
 * abandoned request's outcome would be unknown.  Returns its result, or
 * sets *merror for a failure of the multi interface itself.
 */
static CURLcode
run_one(CURL *h, CURLMcode *merror)
{
	CURLcode	result = CURLE_OK;
	bool		finished = false;

	*merror = CURLM_OK;
	while (!finished)
	{
		int			running = 0;
		int			left;
		CURLMsg    *msg;

		*merror = curl_multi_perform(multi, &running);
		if (*merror == CURLM_OK)
			while ((msg = curl_multi_info_read(multi, &left)) != NULL)
				if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
				{
					result = msg->data.result;
					finished = true;
				}
		if (!finished && *merror == CURLM_OK)
			*merror = curl_multi_poll(multi, NULL, 0, WI_HTTP_POLL_MS, NULL);
		if (*merror != CURLM_OK)
			break;
	}
	curl_multi_remove_handle(multi, h);
	return result;
}

/* See fetch.h. */
const char *
wi_http_send(const char *method, const char *url, const char *origin,
			 const char *const *headers, const char *body,
			 StringInfo response, int max_response, long *status, char **error)
{
	CURL	   *curl;
	struct curl_slist *list = NULL;
	void	   *parsed = NULL;
	BoundedResponse bounded = {response, max_response};
	CURLcode	rc;
	CURLMcode	mrc = CURLM_OK;
	const char *transport;

	*status = 0;
	*error = wi_outbound_gate();
	if (*error != NULL)
		return "not_sent";
	*error = wi_http_refusal(url, origin, &parsed);
	if (*error != NULL)
	{
		wi_stat_add(WI_STAT_REFUSED, 1);
		return "refused";
	}
	curl = curl_easy_init();
	if (curl == NULL)
	{
		curl_url_cleanup((CURLU *) parsed);
		*error = pstrdup("could not initialise libcurl");
		return "not_sent";
	}
	for (int i = 0; headers != NULL && headers[i] != NULL; i++)
		list = curl_slist_append(list, headers[i]);
	curl_easy_setopt(curl, CURLOPT_CURLU, parsed);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	if (body)
	{
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
	}
	else if (strcmp(method, "GET") == 0)
		curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
	wi_curl_defaults(curl);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, bounded_write_cb);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &bounded);
	/* a connection of its own, as a lone transfer has: none is reused after */
	curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);

	mrc = curl_multi_add_handle(multi, curl);
	if (mrc != CURLM_OK)
	{
		/* nothing left */
		transport = "not_sent";
		*error = pstrdup(curl_multi_strerror(mrc));
		curl_slist_free_all(list);
		curl_easy_cleanup(curl);
		curl_url_cleanup((CURLU *) parsed);
		return transport;
	}
	rc = run_one(curl, &mrc);
	if (mrc != CURLM_OK)
	{
		/* the transfer may have begun: its outcome is not known */
		transport = "unknown";
		*error = pstrdup(curl_multi_strerror(mrc));
	}
	else
	{
		transport = classify_transport(rc);
		if (rc == CURLE_OK)
			curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
		else
			*error = pstrdup(curl_easy_strerror(rc));
	}
	curl_slist_free_all(list);
	curl_easy_cleanup(curl);
	curl_url_cleanup((CURLU *) parsed);
	return transport;
}
