/*
 * deliver.c
 *		Webhook delivery engine (see deliver.h).
 *
 * A message is either waiting on its timer (initial delay or retry backoff),
 * in the ready queue, or in flight on one of `concurrency` keep-alive
 * connections.  Completion callbacks only record the outcome and wake the
 * pump event, which starts new requests from the event loop proper (never
 * from inside an evhttp callback).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include "deliver.h"
#include "util.h"

typedef struct dlv_msg
{
	struct dlv_engine *eng;
	struct dlv_msg *next;		/* ready queue link */
	const sim_source *src;
	long		tag;
	hdr_list	headers;
	char	   *body;
	size_t		len;
	int			attempts;
	struct event *timer;
} dlv_msg;

typedef struct dlv_slot
{
	struct dlv_engine *eng;
	struct evhttp_connection *conn;
	dlv_msg    *msg;			/* in flight, or NULL */
	int			status;			/* answer of the finished attempt */
	int			finished;
} dlv_slot;

struct dlv_engine
{
	struct event_base *base;
	char	   *host;
	int			port;
	char	   *prefix;			/* path prefix without trailing slash */
	char		host_header[300];
	dlv_policy	policy;
	dlv_slot   *slots;
	int			nslots;
	dlv_msg    *ready_head;
	dlv_msg    *ready_tail;
	long		waiting;		/* messages on a timer */
	long		inflight;
	struct event *pump;
	dlv_stats	stats;
	dlv_done_fn done_fn;
	void	   *done_arg;
};

static void pump_cb(evutil_socket_t fd, short what, void *arg);

dlv_engine *
dlv_new(struct event_base *base, const char *base_url, int concurrency,
		const dlv_policy *policy, char *err, size_t errlen)
{
	struct evhttp_uri *uri = NULL;
	dlv_engine *e = NULL;
	const char *scheme,
			   *host,
			   *path;
	int			i;

	uri = evhttp_uri_parse(base_url);
	if (uri == NULL)
	{
		snprintf(err, errlen, "invalid URL \"%s\"", base_url);
		goto err;
	}
	scheme = evhttp_uri_get_scheme(uri);
	host = evhttp_uri_get_host(uri);
	if (scheme == NULL || strcmp(scheme, "http") != 0 || host == NULL || *host == '\0')
	{
		snprintf(err, errlen, "URL must be http://HOST[:PORT][/PATH]: \"%s\"", base_url);
		goto err;
	}
	e = xcalloc(1, sizeof(dlv_engine));
	e->base = base;
	e->host = xstrdup(host);
	e->port = evhttp_uri_get_port(uri) > 0 ? evhttp_uri_get_port(uri) : 80;
	path = evhttp_uri_get_path(uri);
	e->prefix = xstrdup(path ? path : "");
	while (strlen(e->prefix) > 0 && e->prefix[strlen(e->prefix) - 1] == '/')
		e->prefix[strlen(e->prefix) - 1] = '\0';
	snprintf(e->host_header, sizeof(e->host_header), "%s:%d", e->host, e->port);
	e->policy = *policy;
	if (e->policy.max_attempts < 1)
		e->policy.max_attempts = 1;
	e->nslots = concurrency > 0 ? concurrency : 1;
	e->slots = xcalloc((size_t) e->nslots, sizeof(dlv_slot));
	for (i = 0; i < e->nslots; i++)
	{
		e->slots[i].eng = e;
		e->slots[i].conn = evhttp_connection_base_new(base, NULL, e->host, (unsigned short) e->port);
		if (e->slots[i].conn == NULL)
		{
			snprintf(err, errlen, "cannot create HTTP connection to %s", e->host_header);
			goto err;
		}
		evhttp_connection_set_timeout(e->slots[i].conn, policy->timeout_s > 0 ? policy->timeout_s : 30);
		evhttp_connection_set_retries(e->slots[i].conn, 0);
	}
	e->pump = event_new(base, -1, 0, pump_cb, e);
	evhttp_uri_free(uri);
	return e;

err:
	if (e)
		dlv_free(e);
	if (uri)
		evhttp_uri_free(uri);
	return NULL;
}

void
dlv_set_done(dlv_engine *e, dlv_done_fn fn, void *arg)
{
	e->done_fn = fn;
	e->done_arg = arg;
}

static void
msg_free(dlv_msg *m)
{
	if (m->timer)
		event_free(m->timer);
	hdr_free(&m->headers);
	free(m->body);
	free(m);
}

static void
wake_pump(dlv_engine *e)
{
	if (e->pump)
		event_active(e->pump, EV_TIMEOUT, 1);
}

static void
make_ready(dlv_msg *m)
{
	dlv_engine *e = m->eng;

	m->next = NULL;
	if (e->ready_tail)
		e->ready_tail->next = m;
	else
		e->ready_head = m;
	e->ready_tail = m;
	wake_pump(e);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	dlv_msg    *m = arg;

	(void) fd;
	(void) what;
	m->eng->waiting--;
	make_ready(m);
}

static void
schedule(dlv_msg *m, int delay_ms)
{
	struct timeval tv;

	if (delay_ms <= 0)
	{
		make_ready(m);
		return;
	}
	if (m->timer == NULL)
		m->timer = evtimer_new(m->eng->base, timer_cb, m);
	tv.tv_sec = delay_ms / 1000;
	tv.tv_usec = (delay_ms % 1000) * 1000;
	m->eng->waiting++;
	evtimer_add(m->timer, &tv);
}

void
dlv_submit(dlv_engine *e, const sim_source *src, long tag,
		   const hdr_list *headers, const char *body, size_t len, int delay_ms)
{
	dlv_msg    *m = xcalloc(1, sizeof(dlv_msg));

	m->eng = e;
	m->src = src;
	m->tag = tag;
	hdr_copy(&m->headers, headers);
	m->body = xstrndup(body, len);
	m->len = len;
	e->stats.submitted++;
	schedule(m, delay_ms);
}

/* Record the outcome of one attempt: ack, retry later, or give up. */
static void
finish_attempt(dlv_engine *e, dlv_msg *m, int status)
{
	if (status >= 200 && status < 300)
	{
		e->stats.acked++;
		if (e->done_fn)
			e->done_fn(e->done_arg, m->tag, status, 1);
		msg_free(m);
		return;
	}
	if (status == 0)
		e->stats.conn_errors++;
	else
		e->stats.non2xx++;
	if (m->attempts >= e->policy.max_attempts)
	{
		e->stats.failed++;
		if (e->done_fn)
			e->done_fn(e->done_arg, m->tag, status, 0);
		msg_free(m);
		return;
	}
	{
		long		delay = e->policy.retry_base_ms;
		int			i;

		for (i = 1; i < m->attempts && delay < e->policy.retry_max_ms; i++)
			delay *= 2;
		if (delay > e->policy.retry_max_ms)
			delay = e->policy.retry_max_ms;
		schedule(m, (int) delay);
	}
}

static void
request_done(struct evhttp_request *req, void *arg)
{
	dlv_slot   *s = arg;

	/* libevent passes NULL on connection failures */
	s->status = req ? evhttp_request_get_response_code(req) : 0;
	s->finished = 1;
	wake_pump(s->eng);
}

static int
start_request(dlv_engine *e, dlv_slot *s, dlv_msg *m)
{
	struct evhttp_request *req;
	struct evkeyvalq *out;
	hdr_list	h;
	sbuf		path;
	int			i,
				rc;

	memset(&h, 0, sizeof(h));
	hdr_copy(&h, &m->headers);
	if (sign_headers(m->src, m->body, m->len, now_epoch(), &h) != 0)
	{
		hdr_free(&h);
		return -1;
	}
	req = evhttp_request_new(request_done, s);
	out = evhttp_request_get_output_headers(req);
	evhttp_add_header(out, "Host", e->host_header);
	evhttp_add_header(out, "Content-Type", "application/json");
	evhttp_add_header(out, "User-Agent", "webhook-sim/1.0");
	for (i = 0; i < h.n; i++)
		evhttp_add_header(out, h.h[i].name, h.h[i].value);
	hdr_free(&h);
	evbuffer_add(evhttp_request_get_output_buffer(req), m->body, m->len);
	sb_init(&path);
	sb_printf(&path, "%s/hooks/%s", e->prefix, m->src->name);
	s->msg = m;
	s->finished = 0;
	m->attempts++;
	if (m->attempts == 1)
		e->stats.first_sent++;
	e->stats.attempts++;
	e->inflight++;
	/* evhttp_make_request frees req itself when it fails */
	rc = evhttp_make_request(s->conn, req, EVHTTP_REQ_POST, path.data);
	sb_free(&path);
	if (rc != 0)
	{
		s->status = 0;
		s->finished = 1;
		wake_pump(e);
	}
	return 0;
}

/*
 * Collect finished attempts, then fill free slots from the ready queue.
 * Runs as its own event so that no request starts inside a callback of the
 * connection it would use.
 */
static void
pump_cb(evutil_socket_t fd, short what, void *arg)
{
	dlv_engine *e = arg;
	int			i;

	(void) fd;
	(void) what;
	for (i = 0; i < e->nslots; i++)
	{
		dlv_slot   *s = &e->slots[i];

		if (s->msg && s->finished)
		{
			dlv_msg    *m = s->msg;

			s->msg = NULL;
			s->finished = 0;
			e->inflight--;
			finish_attempt(e, m, s->status);
		}
	}
	for (i = 0; i < e->nslots && e->ready_head; i++)
	{
		dlv_slot   *s = &e->slots[i];
		dlv_msg    *m;

		if (s->msg)
			continue;
		m = e->ready_head;
		e->ready_head = m->next;
		if (e->ready_head == NULL)
			e->ready_tail = NULL;
		if (start_request(e, s, m) != 0)
		{
			/* unsignable (cannot happen with recorded headers): give up */
			e->stats.failed++;
			if (e->done_fn)
				e->done_fn(e->done_arg, m->tag, 0, 0);
			msg_free(m);
		}
	}
}

int
dlv_idle(const dlv_engine *e)
{
	return e->waiting == 0 && e->inflight == 0 && e->ready_head == NULL;
}

const dlv_stats *
dlv_get_stats(const dlv_engine *e)
{
	return &e->stats;
}

/* Free the engine; messages still in flight or waiting are abandoned. */
void
dlv_free(dlv_engine *e)
{
	int			i;

	if (e == NULL)
		return;
	for (i = 0; i < e->nslots; i++)
		if (e->slots[i].conn)
			evhttp_connection_free(e->slots[i].conn);
	while (e->ready_head)
	{
		dlv_msg    *m = e->ready_head;

		e->ready_head = m->next;
		msg_free(m);
	}
	if (e->pump)
		event_free(e->pump);
	free(e->slots);
	free(e->host);
	free(e->prefix);
	free(e);
}

