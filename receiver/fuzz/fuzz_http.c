/*
 * fuzz_http.c
 *		libFuzzer harness for the receiver's HTTP request handling: the real
 *		http.c (libevent's evhttp parsing, routing, limits, the read
 *		deadline, verification of each delivery, header encoding, replies)
 *		driven in-process over loopback, with the database side (batch.h's
 *		API: batch.c, pipeline.c, dbconn.c) replaced by a stand-in that
 *		commits each delivery on the next loop turn, or fails it, as the
 *		input says.
 *
 * Input layout: byte 0 chooses the listener (bit 0: admin), whether the
 * database is ready (bit 1), whether a batch commits (bit 2) and whether
 * the database refuses the delivery on its own (bit 3: 400); the rest
 * is written as-is to a fresh connection, which is then half-closed, so
 * one input may hold several pipelined requests, a partial one, or
 * garbage.  Each input's connection is served until the receiver closes it.
 *
 * Beyond "no crash, no leak, no sanitizer report", every answer must be a
 * well-formed status line with a status the receiver documents, the public
 * listener must never show metrics, and no answer may carry a secret.
 */
#define _GNU_SOURCE				/* memmem */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "batch.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "sources.h"

#define SECRET_A "whsec_fuzzsecretAAAAAAAAAAAAAAAA"
#define SECRET_B "c2VjcmV0LWZ1enotYg=="

static struct event_base *base;
static rcv_config cfg;
static int	ports[2];
static int	db_ready = 1;
static int	commits = 1;
static int	refuses = 0;		/* the database refuses the delivery alone */
static int	pending;			/* deliveries handed to the stand-in */

/* ---------------------------------------------------------------------
 * The database side, stood in for
 * --------------------------------------------------------------------- */

static void
complete_later(evutil_socket_t fd, short what, void *arg)
{
	rcv_delivery *d = arg;

	(void) fd;
	(void) what;
	pending--;
	if (commits)
	{
		d->status = refuses ? 400 : 200;
		snprintf(d->outcome, sizeof(d->outcome), refuses ? "id_too_long" : "new");
	}
	rcv_http_complete(d, commits);
}

int
rcv_batch_submit(rcv_delivery *d)
{
	struct timeval zero = {0, 0};

	if (!db_ready)
		return -1;
	/* what http.c hands over must be what batch.c reads */
	if (d->source == NULL || d->headers == NULL || d->npairs < 1 || d->headers_len == 0 ||
		(d->len > 0 && d->body == NULL) || (long) d->len > cfg.max_body)
		abort();
	pending++;
	return event_base_once(base, -1, EV_TIMEOUT, complete_later, d, &zero);
}

int
rcv_batch_db_ready(void)
{
	return db_ready;
}

int
rcv_batch_sources_loaded(void)
{
	return 1;
}

/* ---------------------------------------------------------------------
 * Set-up: one source per scheme, the two listeners on loopback
 * --------------------------------------------------------------------- */

static void
add_source(rcv_sources *s, const char *name, const char *kind, const char *problem)
{
	rcv_source *src = &s->items[s->n++];
	rcv_verifier *v = &src->verifier;

	src->name = strdup(name);
	src->kind = strdup(kind);
	src->problem = problem;
	v->scheme = rcv_scheme_lookup(kind);
	v->tolerance = 300;
	v->secrets = calloc(2, sizeof(rcv_secret));
	if (v->scheme->decode_secret(SECRET_A, &v->secrets[v->nsecrets]) == 0)
		v->nsecrets++;
	if (v->scheme->decode_secret(SECRET_B, &v->secrets[v->nsecrets]) == 0)
		v->nsecrets++;
	if (strcmp(kind, "hmac") == 0)
		v->hmac_header = "x-sig";
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(((const rcv_source *) a)->name, ((const rcv_source *) b)->name);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	rcv_sources *s = calloc(1, sizeof(*s));

	(void) argc;
	(void) argv;
	rcv_log_min_level = RCV_LOG_ERROR;
	s->items = calloc(WI_NUM_SOURCE_KINDS + 1, sizeof(rcv_source));
	/* a source named after each kind of webhook_inbox_kinds.h */
	for (int k = 0; k < WI_NUM_SOURCE_KINDS; k++)
		add_source(s, wi_source_kind_name(k), wi_source_kind_name(k), NULL);
	add_source(s, "broken", "hmac", "settings.encoding must be hex or base64");
	qsort(s->items, (size_t) s->n, sizeof(rcv_source), cmp_name);
	rcv_sources_install(s);

	memset(&cfg, 0, sizeof(cfg));
	cfg.listen_host = "127.0.0.1";
	cfg.admin_host = "127.0.0.1";
	cfg.max_body = 4096;
	cfg.max_header = 2048;
	cfg.read_timeout_ms = 200;
	cfg.max_connections = 64;
	cfg.max_per_address = 64;
	cfg.max_buffered = 64L << 10;
	cfg.retry_after = 5;
	cfg.test_now = 1700000000;
	base = event_base_new();
	if (base == NULL || rcv_http_start(base, &cfg, NULL) != 0)
	{
		fprintf(stderr, "fuzz_http: cannot start the listeners\n");
		abort();
	}
	ports[0] = rcv_http_port(0);
	ports[1] = rcv_http_port(1);
	if (ports[0] == 0 || ports[1] == 0)
		abort();
	return 0;
}

/* ---------------------------------------------------------------------
 * One input
 * --------------------------------------------------------------------- */

static int
connect_to(int port)
{
	struct sockaddr_in sa;
	int			fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t) port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0)
	{
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * check_answers
 *		Every answer in what the receiver wrote starts with a status line
 *		whose status it documents; the public listener shows no metrics and
 *		no answer shows a secret.
 */
static void
check_answers(const char *out, size_t len, int admin)
{
	const char *p = out;
	const char *end = out + len;

	if (len == 0)
		return;
	if (memmem(out, len, "whsec_fuzz", 10) || memmem(out, len, SECRET_B, strlen(SECRET_B)))
		abort();
	if (!admin && memmem(out, len, "webhook_receiver_", 17))
		abort();
	while (p < end)
	{
		const char *line = memmem(p, (size_t) (end - p), "HTTP/1.", 7);
		const char *q;
		int			status;

		if (line == NULL)
			break;
		/*
		 * evhttp answers with the request's minor version, HTTP/1.N, kept
		 * in a char: a request saying HTTP/1.397 gets "HTTP/1.-115".
		 */
		q = line + 7;
		if (q < end && *q == '-')
			q++;
		for (; q < end && *q >= '0' && *q <= '9'; q++)
			;
		if (end - q < 4)
			break;				/* (an answer cut off by the buffer's end) */
		if (q == line + 7 || q[-1] == '-' || *q != ' ')
		{
			fprintf(stderr, "malformed status line: %.40s\n", line);
			abort();
		}
		status = atoi(q + 1);
		switch (status)
		{
			case 200:
			case 400:
			case 401:
			case 404:
			case 405:
			case 413:
			case 414:
			case 431:
			case 501:
			case 503:
				break;
			default:
				fprintf(stderr, "unexpected status %d\n", status);
				abort();
		}
		p = q + 4;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[4 << 20];
	size_t		got = 0;
	size_t		sent = 0;
	int			admin;
	int			fd;

	if (size < 1)
		return 0;
	admin = data[0] & 1;
	db_ready = (data[0] & 2) == 0;
	commits = (data[0] & 4) == 0;
	refuses = (data[0] & 8) != 0;
	fd = connect_to(ports[admin]);
	if (fd < 0)
		abort();
	if (size == 1)
		shutdown(fd, SHUT_WR);
	/* write what fits while serving: the receiver reads as we write */
	for (int spins = 0; spins < 20000; spins++)
	{
		struct pollfd pfd = {fd, POLLIN | (sent < size - 1 ? POLLOUT : 0), 0};
		ssize_t		n;

		event_base_loop(base, EVLOOP_NONBLOCK);
		if (poll(&pfd, 1, 1) < 0)
			break;
		if ((pfd.revents & POLLOUT) && sent < size - 1)
		{
			n = send(fd, data + 1 + sent, size - 1 - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t) n;
			else if (n < 0 && errno != EAGAIN)
				break;
			if (sent == size - 1)
				shutdown(fd, SHUT_WR);
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
		{
			n = recv(fd, out + got, sizeof(out) - got, MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN))
				break;			/* the receiver closed the connection */
			if (n > 0)
				got += (size_t) n;
			if (got == sizeof(out))
				break;			/* more than any input can ask for */
		}
	}
	check_answers(out, got, admin);
	close(fd);
	/* let the receiver see the close and free the connection */
	for (int spins = 0; spins < 2000 && (rcv_http_connections() > 0 || pending > 0); spins++)
	{
		event_base_loop(base, EVLOOP_NONBLOCK);
		if (rcv_http_connections() > 0 || pending > 0)
			usleep(100);
	}
	return 0;
}
