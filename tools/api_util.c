/*
 * api_util.c
 *		What the simulator's provider files share: JSON answers and the
 *		providers' error formats, request bodies, query strings and form
 *		bodies, and the injected faults.  api.c (the server) and the provider
 *		files (stripe_api.c, shopify_api.c, shopify_graphql.c, github_api.c,
 *		github_app.c) call it; it calls none of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "api_int.h"
#include "json.h"
#include "webhook_inbox_hex.h"

/* ---------- replies ---------- */

void
api_reply(struct evhttp_request *req, int code, const char *body)
{
	struct evbuffer *buf = evbuffer_new();
	const char *reason;

	switch (code)
	{
		case 200:
			reason = "OK";
			break;
		case 201:
			reason = "Created";
			break;
		case 403:
			reason = "Forbidden";
			break;
		case 422:
			reason = "Unprocessable Entity";
			break;
		case 400:
			reason = "Bad Request";
			break;
		case 401:
			reason = "Unauthorized";
			break;
		case 404:
			reason = "Not Found";
			break;
		case 405:
			reason = "Method Not Allowed";
			break;
		case 429:
			reason = "Too Many Requests";
			break;
		case 503:
			reason = "Service Unavailable";
			break;
		default:
			reason = code >= 500 ? "Server Error" : "Error";
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	evbuffer_add(buf, body, strlen(body));
	evbuffer_add(buf, "\n", 1);
	evhttp_send_reply(req, code, reason, buf);
	evbuffer_free(buf);
}

/*
 * Stripe's error object: {"error":{"type":…,"code":…,"param":…,"message":…,
 * "doc_url":…}}, as stripe-node's StripeError reads it.
 */
void
api_stripe_error(struct evhttp_request *req, int code, const char *type,
				 const char *errcode, const char *param, const char *message)
{
	sbuf		b;

	sb_init(&b);
	sb_printf(&b, "{\"error\":{\"type\":\"%s\"", type);
	if (errcode)
	{
		char		url[128],
				   *p;

		snprintf(url, sizeof(url), "https://stripe.com/docs/error-codes/%s", errcode);
		for (p = url + strlen("https://stripe.com/docs/error-codes/"); *p; p++)
			if (*p == '_')
				*p = '-';
		sb_printf(&b, ",\"code\":\"%s\",\"doc_url\":\"%s\"", errcode, url);
	}
	if (param)
	{
		sb_puts(&b, ",\"param\":");
		sb_json_str(&b, param);
	}
	sb_puts(&b, ",\"message\":");
	sb_json_str(&b, message);
	sb_puts(&b, "}}");
	api_reply(req, code, b.data);
	sb_free(&b);
}

/*
 * GitHub's error object: {"message":…,"documentation_url":…,"status":"…"},
 * as Octokit's RequestError reads it.
 */
void
api_github_error(struct evhttp_request *req, int code, const char *message, const char *docs)
{
	sbuf		b;

	sb_init(&b);
	sb_puts(&b, "{\"message\":");
	sb_json_str(&b, message);
	sb_printf(&b, ",\"documentation_url\":\"%s\",\"status\":\"%d\"}", docs, code);
	api_reply(req, code, b.data);
	sb_free(&b);
}

/* The server's own token, in Authorization as "Bearer X" (or "token X" where token_ok). */
int
api_token_authorized(sim_api *api, struct evhttp_request *req, int token_ok)
{
	const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");

	if (token_ok && v != NULL && strncmp(v, "token ", 6) == 0)
		return strcmp(v + 6, api->api_token) == 0;
	return v != NULL && strncmp(v, "Bearer ", 7) == 0 && strcmp(v + 7, api->api_token) == 0;
}

/*
 * GitHub's credentials: the server's token; a GitHub App's requests carry its
 * JWT or installation tokens instead (github_app.c checks those).
 */
int
api_github_authorized(sim_api *api, struct evhttp_request *req)
{
	return api->gh_app != NULL || api_token_authorized(api, req, 1);
}

/* One more of key in a counter map. */
void
api_count(id_map *mp, const char *key)
{
	long		n = idmap_get(mp, key);

	idmap_put(mp, key, n < 0 ? 1 : n + 1);
}

/* ---------- request bodies ---------- */

char *
api_request_body(struct evhttp_request *req, size_t *len)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t		n = evbuffer_get_length(in);
	char	   *body = xmalloc(n + 1);

	evbuffer_copyout(in, body, n);
	body[n] = '\0';
	*len = n;
	return body;
}

/* Close the client's connection without an answer (the effect happened). */
void
api_drop_connection(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;

	if (bev && bufferevent_getfd(bev) >= 0)
		shutdown(bufferevent_getfd(bev), SHUT_RDWR);
	/* nothing can reach the client now; this only lets libevent clean up */
	evhttp_send_reply(req, 200, "OK", NULL);
}

/* ---------- query strings and form bodies ---------- */

/* Percent-decode s[0..n) with '+' as a space; NULL for a bad escape or NUL. */
static char *
form_decode(const char *s, size_t n)
{
	char	   *out = xmalloc(n + 1),
			   *o = out;
	size_t		i;

	for (i = 0; i < n; i++)
	{
		if (s[i] == '+')
			*o++ = ' ';
		else if (s[i] == '%')
		{
			int			h,
						l;

			if (i + 2 >= n)
				goto bad;
			h = wi_hex_digit((unsigned char) s[i + 1]);
			l = wi_hex_digit((unsigned char) s[i + 2]);
			if (h < 0 || l < 0 || (h == 0 && l == 0))
				goto bad;
			*o++ = (char) (h * 16 + l);
			i += 2;
		}
		else
			*o++ = s[i];
	}
	*o = '\0';
	return out;

bad:
	free(out);
	return NULL;
}

int
params_parse(const char *s, size_t len, sim_params *out)
{
	size_t		i = 0;

	memset(out, 0, sizeof(*out));
	if (s == NULL)
		return 0;
	while (i < len)
	{
		size_t		j = i,
					eq;
		char	   *name,
				   *value;

		while (j < len && s[j] != '&')
			j++;
		if (j > i)
		{
			eq = i;
			while (eq < j && s[eq] != '=')
				eq++;
			name = form_decode(s + i, eq - i);
			value = eq < j ? form_decode(s + eq + 1, j - eq - 1) : xstrdup("");
			if (name == NULL || value == NULL || *name == '\0')
			{
				free(name);
				free(value);
				params_free(out);
				return -1;
			}
			out->p = xrealloc(out->p, (size_t) (out->n + 1) * sizeof(sim_param));
			out->p[out->n].name = name;
			out->p[out->n].value = value;
			out->p[out->n].used = 0;
			out->n++;
		}
		i = j + 1;
	}
	return 0;
}

void
params_free(sim_params *ps)
{
	int			i;

	for (i = 0; i < ps->n; i++)
	{
		free(ps->p[i].name);
		free(ps->p[i].value);
	}
	free(ps->p);
	memset(ps, 0, sizeof(*ps));
}

/* The last value of name (marking it used), or NULL. */
const char *
params_get(sim_params *ps, const char *name)
{
	const char *v = NULL;
	int			i;

	for (i = 0; i < ps->n; i++)
		if (strcmp(ps->p[i].name, name) == 0)
		{
			ps->p[i].used = 1;
			v = ps->p[i].value;
		}
	return v;
}

/* Whether name is one of the NULL-terminated list (a provider's parameter set). */
int
params_name_in(const char *const *list, const char *name)
{
	for (; *list; list++)
		if (strcmp(*list, name) == 0)
			return 1;
	return 0;
}

/* ---------- faults ---------- */

static int
fault_matches(const fault_rule *f, const char *path)
{
	return f->count != 0 && strncmp(path, f->prefix, strlen(f->prefix)) == 0;
}

/*
 * Draw the status and slow faults for one request.  Returns the rule that
 * fires (its count already taken), or NULL.
 */
fault_rule *
api_draw_fault(sim_api *api, const char *path, int want_drop)
{
	int			i;

	for (i = 0; i < api->nfaults; i++)
	{
		fault_rule *f = &api->faults[i];

		if ((f->mode == FAULT_DROP) != want_drop || !fault_matches(f, path))
			continue;
		if (rng_double(&api->fault_rng) >= f->share)
			continue;
		if (f->count > 0)
			f->count--;
		api->faulted++;
		return f;
	}
	return NULL;
}

void
api_add_fault(sim_api *api, const fault_rule *rule)
{
	if (api->nfaults == MAX_FAULTS)
	{
		memmove(&api->faults[0], &api->faults[1], sizeof(fault_rule) * (MAX_FAULTS - 1));
		api->nfaults--;
	}
	api->faults[api->nfaults++] = *rule;
}

int
api_draw_drop(sim_api *api, const char *path)
{
	return api_draw_fault(api, path, 1) != NULL;
}
