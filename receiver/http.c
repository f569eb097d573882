/*
 * http.c
 *		The receiver's HTTP server (libevent evhttp, optionally over TLS):
 *		routing, limits, verification of each delivery, and the replies.
 *
 * Routes of the public listener (--listen), the one providers reach:
 *	POST /hooks/{source}	verify, hand to batch.c, answer after COMMIT
 *							(a Slack source's url_verification handshake is
 *							answered here, with its challenge, and not stored)
 *	GET  /healthz			the process is alive
 * Routes of the admin listener (--admin-listen, loopback by default), kept
 * off the public one because they show every source's name and traffic:
 *	GET  /healthz			the process is alive
 *	GET  /readyz			database ready and sources loaded
 *	GET  /metrics			Prometheus text format
 *
 * Limits are enforced before a request reaches us where libevent can (body
 * and head size: a body announced or grown over the limit is answered 413
 * without being read), and here for what it cannot, so that slow or idle
 * clients cannot starve valid ones:
 *	- a deadline for a client to deliver a whole request, head and body
 *	  (libevent's own timeout restarts on every byte, so a client trickling
 *	  its headers would never hit it);
 *	- a cap on the connections of one client address (conns.c counts them);
 *	- at --max-connections, shedding instead of waiting: a new connection
 *	  closes an idle keep-alive one, else the one whose unfinished request
 *	  began the longest ago (a valid client sends its request at once; the
 *	  oldest unfinished one is the slowest), so that a valid delivery is
 *	  never queued behind trickling clients until their deadline;
 *	- a total budget for the bytes of unanswered requests (--max-buffered):
 *	  a request whose bytes would go past it is answered 503 with
 *	  Retry-After, which providers retry, so that memory stays bounded
 *	  whatever the clients hold;
 *	- no NUL or control byte in the head: libevent would cut a header value
 *	  at a NUL (a\0b.myshopify.com read as a), so the raw bytes are checked
 *	  as they arrive and such a request is refused with 400.
 * Requests refused before libevent has parsed them (budget, head bytes)
 * are answered by writing the reply on the connection ourselves and
 * closing it once the client is done sending (refuse_raw()).
 *
 * Every connection gets a small context, created when its bufferevent is
 * made and freed from the connection's close callback.
 */
#include "http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <openssl/rand.h>

#include "conns.h"
#include "encode.h"
#include "log.h"
#include "metrics.h"
#include "sources.h"
#include "verify.h"

#define CONN_BUCKETS 1024
/* how long a refused client may go on sending before its connection closes */
#define LINGER_MS 2000
/* a connection this young is not shed (pick_victim()) */
#define SHED_GRACE_MS 100
#define DELIVERY_HEADER "x-webhook-inbox-delivery"

/* Where the check of a request's head is (scan_head()). */
typedef struct head_scan
{
	int			in_body;		/* the head's blank line was seen */
	int			line_start;		/* the last byte ended a line */
	int			head_seen;		/* a byte other than CR/LF was seen */
	int			after_cr;		/* the last byte was a CR */
	int			cl_state;		/* bytes of "content-length:" matched on this
								 * line (15: all, in its value); -1: not it */
	int			cl_digits;		/* digits of that value seen */
	long		cl_value;
	long		content_length; /* the body announced, -1: none */
	long		head_len;		/* bytes of the head so far */
} head_scan;

/* Per-connection state. */
typedef struct conn
{
	struct conn *next;			/* all connections */
	struct conn *prev;
	struct conn *hnext;			/* hash chain by evcon */
	struct bufferevent *bev;
	struct evhttp_connection *evcon;	/* NULL until attached */
	struct event *timer;		/* attach, then the request deadline */
	struct evbuffer_cb_entry *out_cb;	/* watches answers libevent makes */
	struct evbuffer_cb_entry *in_cb;	/* notes that a request began */
	int			busy;			/* one of its requests is with us */
	int			started;		/* bytes came since the last answer */
	int			ours;			/* the next answer written is ours */
	int			served;			/* requests answered (keep-alive) */
	int			refused;		/* answered by refuse_raw(), closing */
	struct timespec since;		/* accepted, or its last answer went out */
	long		received;		/* bytes of its request since then */
	long		held;			/* what it counts in the buffered total: its
								 * bytes, or its head and announced body */
	rcv_addr	addr;			/* client address, as counted */
	head_scan	hs;
	const char *refuse;			/* a pipelined head to refuse in handle() */
	int			shut;			/* refused: our side of it is shut down */
} conn;

static struct
{
	struct event_base *base;
	const rcv_config *cfg;
	SSL_CTX    *tls;
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
	struct evhttp *admin;		/* NULL with --admin-listen off */
	struct evhttp_bound_socket *admin_bound;
	conn	   *conns;
	conn	   *hash[CONN_BUCKETS];
	int			nconns;
	int			paused;			/* listener disabled at max-connections */
	struct event *shed_timer;	/* shed_later(), while paused */
	int			stopping;
	void		(*closed) (void);
} h;

/* ---------------------------------------------------------------------
 * Connection tracking
 * --------------------------------------------------------------------- */

static unsigned int
bucket(const struct evhttp_connection *evcon)
{
	return (unsigned int) (((uintptr_t) evcon >> 4) % CONN_BUCKETS);
}

static conn *
conn_find(const struct evhttp_connection *evcon)
{
	for (conn *c = h.hash[bucket(evcon)]; c; c = c->hnext)
		if (c->evcon == evcon)
			return c;
	return NULL;
}

static void conn_closed(struct evhttp_connection *evcon, void *arg);

static void
arm_deadline(conn *c)
{
	struct timeval tv = {h.cfg->read_timeout_ms / 1000,
	(h.cfg->read_timeout_ms % 1000) * 1000};

	evtimer_add(c->timer, &tv);
}

static void
set_listener(int enabled)
{
	struct evconnlistener *l;

	if (h.bound == NULL || h.paused == !enabled)
		return;
	l = evhttp_bound_socket_get_listener(h.bound);
	if (enabled)
		evconnlistener_enable(l);
	else
		evconnlistener_disable(l);
	h.paused = !enabled;
}

/* Tell the shutdown sequence, once, that no connection is left. */
static void
notify_closed(void)
{
	void		(*cb) (void) = h.closed;

	h.closed = NULL;
	if (cb)
		cb();
}

/* The connection is going away (any reason): forget it. */
static void
conn_closed(struct evhttp_connection *evcon, void *arg)
{
	conn	   *c = arg;
	conn	  **pp;

	(void) evcon;
	if (c->out_cb)
		evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
	if (c->in_cb)
		evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->in_cb);
	event_free(c->timer);
	rcv_addr_release(&c->addr);
	rcv_buffered_add(-c->held);
	rcv_metrics_set_buffered(rcv_buffered());
	for (pp = &h.hash[bucket(c->evcon)]; *pp; pp = &(*pp)->hnext)
		if (*pp == c)
		{
			*pp = c->hnext;
			break;
		}
	if (c->prev)
		c->prev->next = c->next;
	else
		h.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
	h.nconns--;
	rcv_metrics_set_connections(h.nconns);
	if (!h.stopping && h.nconns < h.cfg->max_connections)
		set_listener(1);
	if (h.stopping && h.nconns == 0)
		notify_closed();
}

/* A client took longer than read-timeout to deliver a request. */
static void
conn_deadline(evutil_socket_t fd, short what, void *arg)
{
	conn	   *c = arg;

	(void) fd;
	(void) what;
	if (c->evcon == NULL || (c->busy && !c->refused))
		return;
	/* an idle keep-alive connection is routine; a partial request is not */
	if (c->refused)
		;						/* its linger is over */
	else if (!c->started)
		rcv_log(RCV_LOG_DEBUG, "closing an idle connection after read-timeout");
	else
	{
		rcv_metrics_shed("deadline");
		rcv_log(RCV_LOG_INFO, "closing a connection: no complete request within read-timeout");
	}
	evhttp_connection_free(c->evcon);	/* calls conn_closed */
}

static double
age_of(const conn *c, const struct timespec *now)
{
	return (double) (now->tv_sec - c->since.tv_sec) +
		(double) (now->tv_nsec - c->since.tv_nsec) / 1e9;
}

/*
 * pick_victim
 *		The connection to close for a newcomer when every slot is taken:
 *		one holding no request of ours (those are answered at the
 *		database's pace and must not be lost), an idle keep-alive one
 *		first, else the one whose unfinished request began the longest ago,
 *		if that is at least SHED_GRACE_MS ago: a valid client may be
 *		accepted a moment before its bytes arrive, and must not be taken for
 *		a silent one by a burst of newcomers.  NULL when there is none;
 *		*wait_ms is then how long until one may be (-1: none will, every
 *		connection has a request with us).
 */
static conn *
pick_victim(long *wait_ms)
{
	struct timespec now;
	conn	   *idle = NULL;
	conn	   *oldest = NULL;
	double		grace = SHED_GRACE_MS / 1000.0;

	clock_gettime(CLOCK_MONOTONIC, &now);
	for (conn *c = h.conns; c; c = c->next)
	{
		if (c->busy || c->refused || c->evcon == NULL)
			continue;
		if (c->served > 0 && !c->started)
		{
			if (idle == NULL || age_of(c, &now) > age_of(idle, &now))
				idle = c;
		}
		else if (oldest == NULL || age_of(c, &now) > age_of(oldest, &now))
			oldest = c;
	}
	*wait_ms = -1;
	if (idle)
		return idle;
	if (oldest && age_of(oldest, &now) >= grace)
		return oldest;
	if (oldest)
		*wait_ms = (long) ((grace - age_of(oldest, &now)) * 1000) + 1;
	return NULL;
}

/*
 * shed
 *		Close connections (pick_victim()) until fewer than limit are open.
 *		When none can go yet, the listener pauses (newcomers wait in the
 *		kernel's backlog) and, if one may go later, the shed timer comes
 *		back for it; conn_closed() resumes the listener below the limit.
 */
static void
shed(long limit)
{
	long		wait_ms = -1;

	while (h.nconns >= limit)
	{
		conn	   *v = pick_victim(&wait_ms);

		if (v == NULL)
			break;
		if (v->served > 0 && !v->started)
		{
			rcv_metrics_shed("idle");
			rcv_log(RCV_LOG_DEBUG, "closing an idle connection: max-connections reached");
		}
		else
		{
			rcv_metrics_shed("slots_full");
			rcv_log(RCV_LOG_DEBUG, "closing the oldest unfinished request: max-connections reached");
		}
		evhttp_connection_free(v->evcon);	/* calls conn_closed */
	}
	if (h.nconns >= limit)
	{
		set_listener(0);
		if (wait_ms >= 0 && !evtimer_pending(h.shed_timer, NULL))
		{
			struct timeval tv = {wait_ms / 1000, (wait_ms % 1000) * 1000};

			evtimer_add(h.shed_timer, &tv);
		}
	}
}

/* The listener is paused and a connection may be old enough to go now. */
static void
shed_later(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	(void) arg;
	if (!h.stopping && h.paused)
		shed(h.cfg->max_connections);
}

/*
 * conn_attach
 *		Runs right after evhttp finished accepting (same loop iteration,
 *		before any I/O on the connection): the evcon now exists, and is the
 *		argument of its bufferevent's callbacks.
 */
static void
conn_attach(evutil_socket_t fd, short what, void *arg)
{
	conn	   *c = arg;
	void	   *cbarg = NULL;

	(void) fd;
	(void) what;
	bufferevent_getcb(c->bev, NULL, NULL, NULL, &cbarg);
	c->evcon = cbarg;
	c->hnext = h.hash[bucket(c->evcon)];
	h.hash[bucket(c->evcon)] = c;
	evhttp_connection_set_closecb(c->evcon, conn_closed, c);
	evtimer_assign(c->timer, h.base, conn_deadline, c);
	arm_deadline(c);
	rcv_addr_of_fd(bufferevent_getfd(c->bev), &c->addr);
	if (rcv_addr_acquire(&c->addr) > h.cfg->max_per_address && h.cfg->max_per_address > 0)
	{
		rcv_metrics_shed("address_cap");
		rcv_log(RCV_LOG_DEBUG, "closing a new connection: its address is at max-connections-per-address");
		evhttp_connection_free(c->evcon);	/* calls conn_closed */
		return;
	}
	if (h.nconns > h.cfg->max_connections)
		shed(h.cfg->max_connections + 1);
}

/*
 * output_added
 *		Callback on a connection's output buffer.  Answers libevent makes on
 *		its own (413 for a body or head over the limit, 400 for a request it
 *		cannot parse) never reach our handler; this is where they are seen,
 *		so that they are counted and logged like ours.  An answer starts
 *		when bytes are added to an empty buffer; ours are flagged first.
 */
static void
output_added(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	conn	   *c = arg;
	char		head[13];
	int			status;

	if (info->orig_size != 0 || info->n_added == 0)
		return;
	if (c->ours)
	{
		c->ours = 0;
		return;
	}
	if (evbuffer_copyout(buf, head, 12) != 12)
		return;
	head[12] = '\0';
	if (strncmp(head, "HTTP/1.", 7) != 0 || (status = atoi(head + 9)) < 400)
		return;
	rcv_metrics_request("", status);
	rcv_log(RCV_LOG_INFO, "rejected: source=- status=%d reason=%s", status,
			status == 413 ? "body_or_head_too_large" : "unparseable_request");
}

static const char *phrase(int status);

/* A new request begins on c: nothing of its head seen yet. */
static void
head_reset(conn *c)
{
	memset(&c->hs, 0, sizeof(c->hs));
	c->hs.cl_state = -1;		/* the request line is no header */
	c->hs.content_length = -1;
}

/*
 * scan_head
 *		Check the last n bytes of buf, the newest of c's input, while they
 *		belong to the head of its request (up to its blank line): returns
 *		the reason to refuse it for a NUL or another control byte (HTAB
 *		aside, and CR only before LF), or NULL.  libevent keeps header
 *		values as C strings, so a NUL would cut one short rather than be
 *		refused; the body is never scanned.  On the way it notes the head's
 *		length and the Content-Length announced (the largest, if several),
 *		for the memory budget (input_added()).
 */
static const char *
scan_head(conn *c, struct evbuffer *buf, size_t n)
{
	static const char cl_name[] = "content-length:";
	head_scan  *hs = &c->hs;
	size_t		len = evbuffer_get_length(buf);
	struct evbuffer_ptr p;
	struct evbuffer_iovec v[16];

	if (hs->in_body || n == 0 || n > len ||
		evbuffer_ptr_set(buf, &p, len - n, EVBUFFER_PTR_SET) != 0)
		return NULL;
	while (n > 0 && !hs->in_body)
	{
		int			nv = evbuffer_peek(buf, (ev_ssize_t) n, &p, v, 16);
		size_t		done = 0;

		if (nv <= 0)
			break;
		for (int i = 0; i < nv && i < 16 && done < n && !hs->in_body; i++)
		{
			const unsigned char *b = v[i].iov_base;
			size_t		l = v[i].iov_len < n - done ? v[i].iov_len : n - done;

			for (size_t j = 0; j < l; j++)
			{
				unsigned char ch = b[j];

				hs->head_len++;
				if (hs->after_cr && ch != '\n')
					return "control_byte_in_header";
				hs->after_cr = 0;
				if (ch == '\r')
				{
					hs->after_cr = 1;
					continue;
				}
				if (ch == '\n')
				{
					if (hs->cl_state == 15 && hs->cl_digits > 0 &&
						hs->cl_value > hs->content_length)
						hs->content_length = hs->cl_value;
					hs->cl_state = 0;
					hs->cl_value = 0;
					hs->cl_digits = 0;
					/* a blank line after the request line ends the head */
					if (hs->line_start && hs->head_seen)
					{
						hs->in_body = 1;
						break;
					}
					hs->line_start = 1;
					continue;
				}
				if (ch == '\0')
					return "nul_byte_in_header";
				if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
					return "control_byte_in_header";
				hs->line_start = 0;
				hs->head_seen = 1;
				if (hs->cl_state >= 0 && hs->cl_state < 15)
					hs->cl_state = (ch | 0x20) == cl_name[hs->cl_state] ? hs->cl_state + 1 : -1;
				else if (hs->cl_state == 15 && ch >= '0' && ch <= '9')
				{
					/* past any real limit is as good as infinite */
					if (hs->cl_value < (1L << 40))
						hs->cl_value = hs->cl_value * 10 + (ch - '0');
					hs->cl_digits++;
				}
				else if (hs->cl_state == 15 && ch != ' ' && ch != '\t')
					hs->cl_state = -1;
			}
			done += l;
		}
		if (done == 0 || evbuffer_ptr_set(buf, &p, done, EVBUFFER_PTR_ADD) != 0)
			break;
		n -= done;
	}
	return NULL;
}

/* A refused connection: discard whatever the client still sends. */
static void
linger_read(struct bufferevent *bev, void *arg)
{
	(void) arg;
	evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
}

/* Its answer is out: say so with a FIN, and wait for the client's. */
static void
linger_written(struct bufferevent *bev, void *arg)
{
	conn	   *c = arg;

	if (!c->shut && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
	{
		c->shut = 1;
		shutdown(bufferevent_getfd(bev), SHUT_WR);
	}
}

/* The client closed, or failed, or the linger timed out: close. */
static void
linger_event(struct bufferevent *bev, short what, void *arg)
{
	conn	   *c = arg;

	(void) bev;
	(void) what;
	evhttp_connection_free(c->evcon);	/* calls conn_closed */
}

/*
 * refuse_raw
 *		Answer c's request, which libevent has not finished parsing, with
 *		status and a text naming reason, and close the connection: its
 *		bufferevent is taken from evhttp (which never sees another byte of
 *		it), the answer is written, and what the client still sends is
 *		read and dropped for at most LINGER_MS, so that the client reads
 *		the answer rather than a reset.
 */
static void
refuse_raw(conn *c, int status, const char *reason, const char *text)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	struct timeval tv = {LINGER_MS / 1000, (LINGER_MS % 1000) * 1000};

	c->refused = 1;
	rcv_metrics_refused_early(status, reason);
	rcv_log(RCV_LOG_INFO, "rejected: source=- status=%d reason=%s", status, reason);
	bufferevent_setcb(c->bev, linger_read, linger_written, linger_event, c);
	c->ours = 1;
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n"
						"Content-Type: text/plain; charset=utf-8\r\n"
						"Content-Length: %zu\r\n", status, phrase(status), strlen(text));
	if (status == 503)
		evbuffer_add_printf(out, "Retry-After: %ld\r\n", h.cfg->retry_after);
	evbuffer_add_printf(out, "Connection: close\r\n\r\n%s", text);
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	evtimer_del(c->timer);
	evtimer_add(c->timer, &tv);
}

/* The text of the 400 answer for a head refused by scan_head(). */
static const char *
head_refusal_text(const char *reason)
{
	return strcmp(reason, "nul_byte_in_header") == 0
		? "NUL byte in the request head"
		: "control byte in the request head";
}

/*
 * input_added
 *		Bytes of c's request arrived (before libevent parses them): check
 *		the head's bytes, and count the request in the buffered total, by
 *		its bytes so far or, once its head is whole, by its head and the
 *		body it announced (up to --max-body), so that the requests admitted
 *		can finish: one that would take the total past --max-buffered is
 *		refused with 503, at its head rather than halfway through its body.
 */
static void
input_added(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	conn	   *c = arg;
	const char *reason;
	long		n = (long) info->n_added;
	long		want = c->received + n;

	if (n == 0 || c->refused)
		return;
	c->started = 1;
	if (c->evcon != NULL && !c->busy)
	{
		if ((reason = scan_head(c, buf, (size_t) n)) != NULL)
		{
			refuse_raw(c, 400, reason, head_refusal_text(reason));
			return;
		}
		if (c->hs.in_body && c->hs.content_length >= 0)
		{
			long		body = c->hs.content_length < h.cfg->max_body
				? c->hs.content_length : h.cfg->max_body;

			if (c->hs.head_len + body > want)
				want = c->hs.head_len + body;
		}
		/* refused bytes are not counted: refuse_raw() drops them at once */
		if (want > c->held && rcv_buffered() + (want - c->held) > h.cfg->max_buffered)
		{
			refuse_raw(c, 503, "buffer_budget", "receiver busy: too many requests in flight, retry later");
			return;
		}
	}
	c->received += n;
	if (want > c->held)
	{
		rcv_buffered_add(want - c->held);
		c->held = want;
	}
	rcv_metrics_set_buffered(rcv_buffered());
}

/*
 * make_bev
 *		evhttp's hook for each accepted connection: make its bufferevent
 *		(TLS when configured) and start tracking the connection.
 */
static struct bufferevent *
make_bev(struct event_base *base, void *arg)
{
	conn	   *c = NULL;
	SSL		   *ssl = NULL;

	(void) arg;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		goto err;
	c->timer = event_new(base, -1, 0, conn_attach, c);
	if (c->timer == NULL)
		goto err;
	if (h.tls)
	{
		ssl = SSL_new(h.tls);
		if (ssl == NULL)
			goto err;
		c->bev = bufferevent_openssl_socket_new(base, -1, ssl,
												BUFFEREVENT_SSL_ACCEPTING,
												BEV_OPT_CLOSE_ON_FREE);
		ssl = NULL;				/* owned by the bufferevent (or freed) */
	}
	else
		c->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL)
		goto err;
	c->out_cb = evbuffer_add_cb(bufferevent_get_output(c->bev), output_added, c);
	c->in_cb = evbuffer_add_cb(bufferevent_get_input(c->bev), input_added, c);
	clock_gettime(CLOCK_MONOTONIC, &c->since);
	head_reset(c);
	event_active(c->timer, EV_TIMEOUT, 1);
	c->next = h.conns;
	if (h.conns)
		h.conns->prev = c;
	h.conns = c;
	h.nconns++;
	rcv_metrics_set_connections(h.nconns);
	return c->bev;
err:
	/* evhttp then makes a plain bufferevent itself; better than nothing */
	rcv_log(RCV_LOG_ERROR, "out of memory accepting a connection");
	if (ssl)
		SSL_free(ssl);
	if (c && c->timer)
		event_free(c->timer);
	free(c);
	return NULL;
}

/* ---------------------------------------------------------------------
 * Replies
 * --------------------------------------------------------------------- */

static const char *
phrase(int status)
{
	switch (status)
	{
		case 200:
			return "OK";
		case 400:
			return "Bad Request";
		case 401:
			return "Unauthorized";
		case 404:
			return "Not Found";
		case 405:
			return "Method Not Allowed";
		case 413:
			return "Payload Too Large";
		case 503:
			return "Service Unavailable";
		default:
			return "Error";
	}
}

/* The answer about to be written to req's connection is ours, not libevent's. */
static void
mark_ours(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	conn	   *c = evcon ? conn_find(evcon) : NULL;

	if (c)
		c->ours = 1;
}

/*
 * reply
 *		Answer req with status and a short text body.  For hook routes,
 *		source is the label for metrics ("" for an unknown source) and
 *		logname what the log line shows; rejected requests log one line with
 *		source, status and reason, and never a header value or the body.
 */
static void
reply(struct evhttp_request *req, const char *source, const char *logname,
	  int status, const char *text, const char *reason)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	struct evbuffer *body = evbuffer_new();

	if (source)
		rcv_metrics_request(source, status);
	if (status >= 400 && source)
		rcv_log(RCV_LOG_INFO, "rejected: source=%s status=%d reason=%s",
				logname && *logname ? logname : "-", status, reason ? reason : text);
	evhttp_add_header(out, "Content-Type", "text/plain; charset=utf-8");
	if (status == 503)
	{
		char		ra[16];

		snprintf(ra, sizeof(ra), "%ld", h.cfg->retry_after);
		evhttp_add_header(out, "Retry-After", ra);
	}
	if (h.stopping)
		evhttp_add_header(out, "Connection", "close");
	if (body)
		evbuffer_add(body, text, strlen(text));
	mark_ours(req);
	evhttp_send_reply(req, status, phrase(status), body);
	if (body)
		evbuffer_free(body);
}

/*
 * rcv_http_complete
 *		batch.c's verdict on a delivery: 200 with the outcome word only after
 *		its COMMIT succeeded, 503 otherwise.  Frees d.
 */
void
rcv_http_complete(rcv_delivery *d, int committed)
{
	if (committed)
		reply(d->req, d->source, d->source, d->status, d->outcome, NULL);
	else
		reply(d->req, d->source, d->source, 503, "database unavailable",
			  "database_unavailable");
	free(d->source);
	free(d->headers);
	free(d);
}

/*
 * reply_challenge
 *		Answer Slack's url_verification handshake of source: 200 with
 *		{"challenge":<token>}, token being the request's own JSON string
 *		(rcv_slack_challenge() checked it is one).  Nothing is stored: the
 *		handshake is no event (it has no event_id), and Slack sends it again
 *		whenever the Request URL is saved.
 */
static void
reply_challenge(struct evhttp_request *req, const char *source,
				const unsigned char *token, size_t len)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	struct evbuffer *body = evbuffer_new();

	if (body == NULL ||
		evbuffer_add(body, "{\"challenge\":", 13) != 0 ||
		evbuffer_add(body, token, len) != 0 ||
		evbuffer_add(body, "}", 1) != 0)
	{
		if (body)
			evbuffer_free(body);
		reply(req, source, source, 503, "out of memory", "out_of_memory");
		return;
	}
	rcv_metrics_request(source, 200);
	rcv_log(RCV_LOG_INFO, "answered slack url_verification: source=%s", source);
	evhttp_add_header(out, "Content-Type", "application/json");
	if (h.stopping)
		evhttp_add_header(out, "Connection", "close");
	mark_ours(req);
	evhttp_send_reply(req, 200, "OK", body);
	evbuffer_free(body);
}

/* ---------------------------------------------------------------------
 * Routes
 * --------------------------------------------------------------------- */

/*
 * Headers not passed to intake(): those that authenticate someone to us
 * (not data), and our own delivery id, which a client must not choose.
 */
static int
is_private_header(const char *name)
{
	return strcasecmp(name, "authorization") == 0 ||
		strcasecmp(name, "proxy-authorization") == 0 ||
		strcasecmp(name, "cookie") == 0 ||
		strcasecmp(name, DELIVERY_HEADER) == 0;
}

/*
 * new_delivery_id
 *		A random UUID (version 4) naming this one delivery attempt; stored
 *		in deliveries.delivery_id and echoed in the answer, so an operator
 *		can match a provider's retry log to our audit rows.
 */
static void
new_delivery_id(char out[37])
{
	/* random bytes drawn 256 ids at a time: one RAND_bytes() call, not one per delivery */
	static unsigned char pool[16 * 256];
	static size_t used = sizeof(pool);
	unsigned char b[16];

	if (used == sizeof(pool))
	{
		if (RAND_bytes(pool, sizeof(pool)) != 1)
		{
			/* not security relevant: an id, not a secret */
			for (size_t i = 0; i < sizeof(pool); i++)
				pool[i] = (unsigned char) random();
		}
		used = 0;
	}
	memcpy(b, pool + used, sizeof(b));
	used += sizeof(b);
	b[6] = (unsigned char) ((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char) ((b[8] & 0x3f) | 0x80);
	/* by hand, not snprintf: this runs for every delivery */
	for (int i = 0, k = 0; i < 16; i++)
	{
		static const char hex[] = "0123456789abcdef";

		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[k++] = '-';
		out[k++] = hex[b[i] >> 4];
		out[k++] = hex[b[i] & 0x0f];
	}
	out[36] = '\0';
}

static void
handle_hook(struct evhttp_request *req, const char *name)
{
	const rcv_sources *sources = rcv_sources_current();
	const rcv_source *src;
	struct evbuffer *in;
	struct evkeyvalq *hdrq;
	struct evkeyval *kv;
	rcv_header *hdrs = NULL;
	rcv_delivery *d = NULL;
	const unsigned char *body;
	rcv_verify_result r;
	const unsigned char *challenge;
	size_t		challenge_len;
	char		safe[80];
	size_t		len;
	int			nhdrs = 0;
	int			nstore = 0;
	char		delivery_id[37];

	rcv_log_safe(name, safe, sizeof(safe));
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
	{
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		src = rcv_sources_find(sources, name);
		reply(req, src ? src->name : "", safe, 405, "method not allowed", "method_not_allowed");
		return;
	}
	if (sources == NULL)
	{
		reply(req, "", safe, 503, "sources not loaded yet", "sources_not_loaded");
		return;
	}
	src = rcv_sources_find(sources, name);
	if (src == NULL)
	{
		reply(req, "", safe, 404, "unknown source", "unknown_source");
		return;
	}
	if (src->problem)
	{
		reply(req, src->name, src->name, 503, "source misconfigured", "source_misconfigured");
		return;
	}

	in = evhttp_request_get_input_buffer(req);
	len = evbuffer_get_length(in);
	if (len > (size_t) h.cfg->max_body)
	{
		reply(req, src->name, src->name, 413, "body too large", "body_too_large");
		return;
	}
	body = len ? evbuffer_pullup(in, -1) : (const unsigned char *) "";

	hdrq = evhttp_request_get_input_headers(req);
	TAILQ_FOREACH(kv, hdrq, next)
		nhdrs++;
	hdrs = calloc((size_t) nhdrs + 1, sizeof(rcv_header));
	if (hdrs == NULL || body == NULL)
		goto oom;
	nhdrs = 0;
	TAILQ_FOREACH(kv, hdrq, next)
	{
		hdrs[nhdrs].name = kv->key;
		hdrs[nhdrs].value = kv->value;
		nhdrs++;
	}

	r = rcv_verify(&src->verifier, hdrs, nhdrs, body, len,
				   h.cfg->test_now ? (time_t) h.cfg->test_now : time(NULL));
	if (r != RCV_OK)
	{
		rcv_metrics_verify_failure(src->name, rcv_verify_reason(r));
		reply(req, src->name, src->name, 401, rcv_verify_reason(r), NULL);
		free(hdrs);
		return;
	}
	if (h.stopping)
	{
		reply(req, src->name, src->name, 503, "shutting down", "shutting_down");
		free(hdrs);
		return;
	}
	if (src->verifier.scheme->kind == WI_KIND_slack &&
		rcv_slack_challenge(body, len, &challenge, &challenge_len))
	{
		reply_challenge(req, src->name, challenge, challenge_len);
		free(hdrs);
		return;
	}

	/* what intake() stores: every header but credentials meant for us */
	for (int i = 0; i < nhdrs; i++)
		if (!is_private_header(hdrs[i].name))
			hdrs[nstore++] = hdrs[i];
	new_delivery_id(delivery_id);
	hdrs[nstore].name = DELIVERY_HEADER;
	hdrs[nstore].value = delivery_id;
	nstore++;
	evhttp_add_header(evhttp_request_get_output_headers(req), "X-Webhook-Inbox-Delivery",
					  delivery_id);
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		goto oom;
	d->req = req;
	d->source = strdup(src->name);
	d->headers = rcv_encode_header_elements(hdrs, nstore, &d->headers_len);
	d->npairs = nstore;
	d->body = body;
	d->len = len;
	free(hdrs);
	hdrs = NULL;
	if (d->source == NULL || d->headers == NULL)
		goto oom;
	if (rcv_batch_submit(d) != 0)
	{
		reply(req, src->name, src->name, 503, "database unavailable", "database_unavailable");
		free(d->source);
		free(d->headers);
		free(d);
	}
	return;
oom:
	free(hdrs);
	if (d)
	{
		free(d->source);
		free(d->headers);
		free(d);
	}
	reply(req, src->name, src->name, 503, "out of memory", "out_of_memory");
}

static int
is_get(struct evhttp_request *req)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);

	if (m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD)
		return 1;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
	reply(req, NULL, NULL, 405, "method not allowed", NULL);
	return 0;
}

static void
handle_metrics(struct evhttp_request *req)
{
	size_t		len = 0;
	char	   *text = rcv_metrics_render(&len);
	struct evbuffer *body = evbuffer_new();

	if (text == NULL || body == NULL)
	{
		free(text);
		if (body)
			evbuffer_free(body);
		reply(req, NULL, NULL, 503, "out of memory", NULL);
		return;
	}
	evbuffer_add(body, text, len);
	free(text);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
					  "text/plain; version=0.0.4; charset=utf-8");
	if (h.stopping)
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
	mark_ours(req);
	evhttp_send_reply(req, 200, "OK", body);
	evbuffer_free(body);
}

/* The response went out: the connection may take another request. */
static void
request_done(struct evhttp_request *req, void *arg)
{
	conn	   *c = arg;

	(void) req;
	c->busy = 0;
	c->started = 0;
	c->served++;
	clock_gettime(CLOCK_MONOTONIC, &c->since);
	rcv_buffered_add(-c->held);
	c->received = 0;
	c->held = 0;
	head_reset(c);
	/* a pipelined next request already read: count and check it now */
	{
		struct evbuffer *in = bufferevent_get_input(c->bev);
		size_t		left = evbuffer_get_length(in);

		if (left > 0)
		{
			c->started = 1;
			c->received = c->held = (long) left;
			rcv_buffered_add((long) left);
			c->refuse = scan_head(c, in, left);
		}
	}
	rcv_metrics_set_buffered(rcv_buffered());
	if (!h.stopping)
		arm_deadline(c);
	/* paused with every slot busy: this one may now give way to the backlog */
	if (h.paused && !h.stopping && !evtimer_pending(h.shed_timer, NULL))
	{
		struct timeval now = {0, 0};

		evtimer_add(h.shed_timer, &now);
	}
}

/* The readiness answer, for load balancers and operators. */
static void
handle_readyz(struct evhttp_request *req)
{
	if (!is_get(req))
		return;
	if (h.stopping)
		reply(req, NULL, NULL, 503, "shutting down", NULL);
	else if (!rcv_batch_db_ready())
		reply(req, NULL, NULL, 503, "database not ready", NULL);
	else if (!rcv_batch_sources_loaded())
		reply(req, NULL, NULL, 503, "sources not loaded", NULL);
	else if (rcv_batch_sources_failing())
		/* e.g. the database's key file changed: the log says why */
		reply(req, NULL, NULL, 503, "sources could not be reloaded", NULL);
	else
		reply(req, NULL, NULL, 200, "ready", NULL);
}

/* evhttp's callback for every complete request on the public listener. */
static void
handle(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	conn	   *c = conn_find(evhttp_request_get_connection(req));

	(void) arg;
	if (c)
	{
		c->busy = 1;
		evtimer_del(c->timer);
		evhttp_request_set_on_complete_cb(req, request_done, c);
		if (c->refuse)
		{
			const char *reason = c->refuse;

			c->refuse = NULL;
			rcv_metrics_refused_early(400, reason);
			reply(req, NULL, NULL, 400, head_refusal_text(reason), NULL);
			rcv_log(RCV_LOG_INFO, "rejected: source=- status=400 reason=%s", reason);
			return;
		}
	}
	if (path == NULL)
		path = "";
	if (strncmp(path, "/hooks/", 7) == 0 && path[7] != '\0' && strchr(path + 7, '/') == NULL)
		handle_hook(req, path + 7);
	else if (strcmp(path, "/healthz") == 0)
	{
		if (is_get(req))
			reply(req, NULL, NULL, 200, "ok", NULL);
	}
	else
		/* /metrics and /readyz included: they are the admin listener's */
		reply(req, "", "-", 404, "not found", "no_such_route");
}

/* evhttp's callback for every request on the admin listener. */
static void
handle_admin(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;

	(void) arg;
	if (path == NULL)
		path = "";
	if (strcmp(path, "/healthz") == 0)
	{
		if (is_get(req))
			reply(req, NULL, NULL, 200, "ok", NULL);
	}
	else if (strcmp(path, "/readyz") == 0)
		handle_readyz(req);
	else if (strcmp(path, "/metrics") == 0)
	{
		if (is_get(req))
			handle_metrics(req);
	}
	else
		reply(req, NULL, NULL, 404, "not found", NULL);
}

/*
 * start_admin
 *		The admin listener: plain HTTP, small requests, no connection
 *		tracking (it is not where providers or the public come in).
 *		Returns 0, or -1 after logging why.
 */
static int
start_admin(struct event_base *base, const rcv_config *cfg)
{
	struct timeval tv = {cfg->read_timeout_ms / 1000, (cfg->read_timeout_ms % 1000) * 1000};

	h.admin = evhttp_new(base);
	if (h.admin == NULL)
		return -1;
	evhttp_set_allowed_methods(h.admin, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
							   EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
							   EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
							   EVHTTP_REQ_PATCH);
	evhttp_set_max_body_size(h.admin, 4096);
	evhttp_set_max_headers_size(h.admin, cfg->max_header);
	evhttp_set_timeout_tv(h.admin, &tv);
	evhttp_set_gencb(h.admin, handle_admin, NULL);
	h.admin_bound = evhttp_bind_socket_with_handle(h.admin, cfg->admin_host,
												   (ev_uint16_t) cfg->admin_port);
	if (h.admin_bound == NULL)
	{
		rcv_log(RCV_LOG_ERROR, "cannot listen on %s:%d (admin-listen)", cfg->admin_host,
				cfg->admin_port);
		return -1;
	}
	rcv_log(RCV_LOG_INFO, "admin (metrics, readyz) listening on http://%s:%d", cfg->admin_host,
			rcv_http_port(1));
	return 0;
}

/*
 * rcv_http_start
 *		Create the server and bind it.  Returns 0, or -1 after logging why.
 */
int
rcv_http_start(struct event_base *base, const rcv_config *cfg, SSL_CTX *tls)
{
	struct timeval tv = {cfg->read_timeout_ms / 1000, (cfg->read_timeout_ms % 1000) * 1000};

	memset(&h, 0, sizeof(h));
	h.base = base;
	h.cfg = cfg;
	h.tls = tls;
	h.shed_timer = evtimer_new(base, shed_later, NULL);
	h.http = evhttp_new(base);
	if (h.http == NULL || h.shed_timer == NULL)
		return -1;
	/* every method reaches us, so that a wrong one is a 405, not a 501 */
	evhttp_set_allowed_methods(h.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
							   EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
							   EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
							   EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
							   EVHTTP_REQ_PATCH);
	evhttp_set_max_body_size(h.http, cfg->max_body);
	evhttp_set_max_headers_size(h.http, cfg->max_header);
	evhttp_set_timeout_tv(h.http, &tv);
	evhttp_set_bevcb(h.http, make_bev, NULL);
	evhttp_set_gencb(h.http, handle, NULL);
	h.bound = evhttp_bind_socket_with_handle(h.http, cfg->listen_host,
											 (ev_uint16_t) cfg->listen_port);
	if (h.bound == NULL)
	{
		rcv_log(RCV_LOG_ERROR, "cannot listen on %s:%d", cfg->listen_host,
				cfg->listen_port);
		return -1;
	}
	rcv_log(RCV_LOG_INFO, "listening on %s://%s:%d", tls ? "https" : "http",
			cfg->listen_host, rcv_http_port(0));
	if (cfg->admin_host && start_admin(base, cfg) != 0)
		return -1;
	return 0;
}

/*
 * rcv_http_shutdown
 *		Stop accepting, close idle connections, and let busy ones close
 *		after their answer; closed() runs once none is left.
 */
void
rcv_http_shutdown(void (*closed) (void))
{
	conn	   *c;
	conn	   *next;

	h.stopping = 1;
	h.closed = closed;
	if (h.shed_timer)
		evtimer_del(h.shed_timer);
	if (h.bound)
		evhttp_del_accept_socket(h.http, h.bound);
	h.bound = NULL;
	for (c = h.conns; c; c = next)
	{
		next = c->next;
		if (!c->busy && c->evcon)
			evhttp_connection_free(c->evcon);
	}
	if (h.nconns == 0)
		notify_closed();
}

/*
 * rcv_http_port
 *		The port the public (admin 0) or admin (admin 1) listener is bound
 *		to, which is the kernel's choice when the configured one is 0; 0 when
 *		that listener is not open.
 */
int
rcv_http_port(int admin)
{
	struct evhttp_bound_socket *b = admin ? h.admin_bound : h.bound;
	struct sockaddr_storage ss;
	socklen_t	len = sizeof(ss);

	if (b == NULL ||
		getsockname(evhttp_bound_socket_get_fd(b), (struct sockaddr *) &ss, &len) != 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *) &ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
	return 0;
}

int
rcv_http_connections(void)
{
	return h.nconns;
}

void
rcv_http_free(void)
{
	h.closed = NULL;
	if (h.shed_timer)
		event_free(h.shed_timer);
	h.shed_timer = NULL;
	if (h.http)
		evhttp_free(h.http);
	h.http = NULL;
	if (h.admin)
		evhttp_free(h.admin);
	h.admin = NULL;
	h.admin_bound = NULL;
}
