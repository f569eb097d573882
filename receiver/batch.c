/*
 * batch.c
 *		Group commit: which verified deliveries go together in one
 *		transaction, and when.  What the connections carry is pipeline.c's
 *		(the connections themselves dbconn.c's); this file decides what goes
 *		in a batch, and pipeline.c tells it through its hooks what became of
 *		each batch.
 *
 * A batch is one statement, whatever its size: its sources, headers and
 * bodies travel as three arrays in PostgreSQL's binary array format (no
 * escaping of the bodies), and intake_batch() writes them set-based and
 * returns one outcome per delivery, in order.  A delivery's own fault (an
 * over-long id, a source disabled since the last load) is its own answer,
 * 4xx, and never touches its batch-mates; intake_batch() writes rows in
 * a stable key order, so batches on different connections cannot deadlock.
 *
 * Each batch is alone in its implicit transaction, and a connection
 * carries up to --db-pipeline of them: the server starts a batch as soon
 * as the one before it committed, instead of waiting a round trip for it.
 * While the answers of one batch travel and its clients send their next
 * requests, the next batch executes.  Deliveries wait in one shared queue;
 * the connection with the fewest batches in flight takes the next batch.
 * A batch is due when it is full, when its first delivery has waited
 * batch-delay, at shutdown, or, while batches are in flight, when the
 * queue holds one pipeline slot's share (see batch_share).
 *
 * The guarantee: a delivery is reported committed only when pipeline.c
 * reports its batch committed, after its sync came back with no error.
 * Anything else (an error, a lost connection, a silent server) reports
 * every delivery of the batch as not committed, and the HTTP side answers
 * 503.  While no connection is ready, submissions are refused at once, and
 * what waits is answered 503 as soon as the last one is lost.
 *
 * On a connection whose database is still at release 0.1.0 (no
 * intake_batch(), see pipeline.c) a batch is one intake() call per delivery,
 * all of them before one sync: still one transaction and one commit per
 * batch, and still no 2xx before it.  (A delivery intake() refuses, a
 * source unknown or disabled since our last load, fails its batch in this
 * mode: every delivery of it is answered 503, the sources are reloaded,
 * and the retry is answered 404 by us.)
 */
#include "batch.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "encode.h"
#include "metrics.h"
#include "pipeline.h"

/* A batch stops growing at this many body bytes (a parameter must stay far below 1 GB). */
#define BATCH_MAX_BYTES (64 * 1024 * 1024)

/* Group commit's state: the queue, and what a shutdown waits for. */
static struct
{
	const rcv_config *cfg;
	rcv_complete_fn complete;
	rcv_connections_fn connections;

	/* deliveries waiting for a batch */
	rcv_delivery *head;
	rcv_delivery *tail;
	int			nwaiting;
	int			delay_due;
	struct event *delay_ev;
	struct timeval delay;		/* batch-delay, as the timer takes it */

	int			stopping;
	void		(*drained) (void);

	/* the three array parameters of a batch, reused */
	rcv_abuf	arg[3];
} group;

/* Hand every delivery of a list back to the HTTP side, timing each. */
static void
complete_all(rcv_delivery *list, int committed)
{
	while (list)
	{
		rcv_delivery *next = list->next;

		list->next = NULL;
		rcv_metrics_delivery(rcv_metrics_since(&list->queued_at));
		group.complete(list, committed);
		list = next;
	}
}

/* At shutdown, once nothing waits or is in flight: drained, once. */
static void
check_drained(void)
{
	if (group.stopping && group.drained && group.nwaiting == 0 && rcv_pipeline_in_flight() == 0)
	{
		void		(*cb) (void) = group.drained;

		group.drained = NULL;
		cb();
	}
}

/* Answer 503 to everything waiting (no connection can take it). */
static void
fail_waiting(void)
{
	complete_all(group.head, 0);
	group.head = group.tail = NULL;
	group.nwaiting = 0;
	group.delay_due = 0;
	event_del(group.delay_ev);
}

/*
 * encode_batch
 *		The three arrays of intake_batch() for the deliveries of list (n of
 *		them): sources, headers as one row per delivery padded with NULL
 *		pairs to the longest, bodies.  Returns 0 or -1 (out of memory).
 */
static int
encode_batch(rcv_delivery *list, int n)
{
	int			width = 0;
	int			dims[2];

	for (rcv_delivery *d = list; d; d = d->next)
		if (d->npairs * 2 > width)
			width = d->npairs * 2;
	dims[0] = n;
	dims[1] = width;
	if (rcv_abuf_start(&group.arg[0], 1, dims, 0, TEXTOID) < 0 ||
		rcv_abuf_start(&group.arg[1], width ? 2 : 0, dims, 1, TEXTOID) < 0 ||
		rcv_abuf_start(&group.arg[2], 1, dims, 0, BYTEAOID) < 0)
		return -1;
	for (rcv_delivery *d = list; d; d = d->next)
	{
		if (rcv_abuf_elem(&group.arg[0], d->source, strlen(d->source)) < 0 ||
			rcv_abuf_add(&group.arg[1], d->headers, d->headers_len) < 0 ||
			rcv_abuf_elem(&group.arg[2], d->body, d->len) < 0)
			return -1;
		for (int k = d->npairs * 2; k < width; k++)
			if (rcv_abuf_int(&group.arg[1], -1) < 0)
				return -1;
	}
	return 0;
}

/*
 * A pipeline slot's share of the deliveries that wait on the database: the
 * most one batch takes (within batch-size), and, while batches are in
 * flight, the queue that makes the next one due.  What waits is the queue,
 * the batches in flight and whatever the open client connections may still
 * send (each has at most one request in flight); the slots are the usable
 * connections times --db-pipeline.  Taking more than a share would leave a
 * server process idle: 64 clients in one batch of 64 leave the process idle
 * while its answers travel and the next 64 requests come in; two batches
 * of 32 on one connection keep the second queued behind the one that
 * executes (four of 16 on two connections, one behind each).
 */
static int
batch_share(void)
{
	int			slots = rcv_pipeline_slots();
	long		waiting = group.nwaiting + rcv_pipeline_in_flight();
	long		share;

	if (slots == 0)
		slots = 1;
	if (waiting < group.connections())
		waiting = group.connections();
	share = (waiting + slots - 1) / slots;
	if (share > group.cfg->batch_size)
		share = group.cfg->batch_size;
	return share < 1 ? 1 : (int) share;
}

/*
 * send_batch_single
 *		The deliveries of b as one intake() call each, on a connection whose
 *		database has no intake_batch() (0.1.0): all before b's one sync, so
 *		one transaction.  Each call's arguments are its source, its headers
 *		as a one-dimensional text[] and its body, in binary.  Returns 0, or
 *		-1 when libpq refused (its error message says why) or memory ran out.
 */
static int
send_batch_single(PGconn *conn, rcv_dbbatch *b)
{
	static const int formats[3] = {1, 1, 1};

	b->next_outcome = b->deliveries;
	for (rcv_delivery *d = b->deliveries; d; d = d->next)
	{
		int			dims[1] = {d->npairs * 2};
		const char *values[3];
		int			lengths[3];

		if (rcv_abuf_start(&group.arg[1], d->npairs > 0 ? 1 : 0, dims, 0, TEXTOID) < 0 ||
			rcv_abuf_add(&group.arg[1], d->headers, d->headers_len) < 0)
			return -1;
		values[0] = d->source;
		lengths[0] = (int) strlen(d->source);
		values[1] = group.arg[1].data;
		lengths[1] = (int) group.arg[1].len;
		values[2] = (const char *) d->body;
		lengths[2] = (int) d->len;
		if (!PQsendQueryPrepared(conn, RCV_STMT_SINGLE, 3, values, lengths, formats, 0))
			return -1;
	}
	return 0;
}

/*
 * send_batch
 *		Move up to a slot's share of the waiting deliveries (at most
 *		batch-size, and about BATCH_MAX_BYTES of bodies) into one
 *		transaction on p: one intake_batch() call, committed at its sync.
 */
static void
send_batch(rcv_pipeline *p)
{
	PGconn	   *conn = rcv_pipeline_pgconn(p);
	rcv_delivery *d;
	int			limit = batch_share();
	rcv_dbbatch *b = rcv_pipeline_batch_push(p);
	rcv_delivery **tailp = &b->deliveries;
	int			n = 0;
	size_t		bytes = 0;
	const char *values[3];
	int			lengths[3];
	static const int formats[3] = {1, 1, 1};

	while (group.head && n < limit &&
		   (n == 0 || bytes + group.head->len <= BATCH_MAX_BYTES))
	{
		d = group.head;
		group.head = d->next;
		d->next = NULL;
		*tailp = d;
		tailp = &d->next;
		n++;
		bytes += d->len;
		group.nwaiting--;
		b->n = n;
	}
	if (group.head == NULL)
		group.tail = NULL;
	if (b->single)
	{
		if (send_batch_single(conn, b) < 0)
			goto err;
	}
	else
	{
		if (encode_batch(b->deliveries, n) < 0)
		{
			rcv_pipeline_fail(p, "out of memory");
			return;
		}
		for (int i = 0; i < 3; i++)
		{
			values[i] = group.arg[i].data;
			lengths[i] = (int) group.arg[i].len;
		}
		if (!PQsendQueryPrepared(conn, RCV_STMT_BATCH, 3, values, lengths, formats, 0))
			goto err;
	}
	/* what is left was already waiting: the next free slot takes it */
	group.delay_due = group.nwaiting > 0;
	if (group.nwaiting == 0)
		event_del(group.delay_ev);
	rcv_pipeline_sent(p);
	return;
err:
	/* b holds what was taken: it comes back through batch_done */
	rcv_pipeline_fail(p, PQerrorMessage(conn));
}

/*
 * The answer for a delivery intake_batch() refused on its own account: 404
 * for a source that is unknown or disabled (the database knew before our
 * reload), 400 for what the delivery carries (an over-long id).  The body
 * is the reason's code, the part before its colon.
 */
static void
set_refusal(rcv_delivery *d, const char *reason)
{
	size_t		n = strcspn(reason ? reason : "", ":");

	if (n == 0)
	{
		reason = "refused";
		n = strlen(reason);
	}
	if (n >= sizeof(d->outcome))
		n = sizeof(d->outcome) - 1;
	memcpy(d->outcome, reason, n);
	d->outcome[n] = '\0';
	d->status = strcmp(d->outcome, "unknown_source") == 0 ||
		strcmp(d->outcome, "source_disabled") == 0 ? 404 : 400;
	rcv_metrics_refusal(d->source, d->outcome);
}

/*
 * Take intake_batch()'s rows: one per delivery of b, in order.
 * Returns 0, or -1 when the result does not have that shape.
 */
static int
take_outcomes(rcv_dbbatch *b, const PGresult *res)
{
	rcv_delivery *d = b->deliveries;

	if (PQntuples(res) != b->n || PQnfields(res) != 3)
		return -1;
	for (int i = 0; i < b->n; i++, d = d->next)
	{
		const char *outcome = PQgetvalue(res, i, 1);

		if (d == NULL || PQgetisnull(res, i, 0) || PQgetisnull(res, i, 1) ||
			atoi(PQgetvalue(res, i, 0)) != i + 1)
			return -1;
		if (strcmp(outcome, "refused") == 0)
			set_refusal(d, PQgetisnull(res, i, 2) ? NULL : PQgetvalue(res, i, 2));
		else
		{
			d->status = 200;
			snprintf(d->outcome, sizeof(d->outcome), "%s", outcome);
		}
	}
	b->noutcomes = b->n;
	return 0;
}

/*
 * batch_result
 *		pipeline.c's hook for a result of batch b that is no error:
 *		intake()'s outcome of the next delivery on a single connection, or
 *		all of intake_batch()'s rows at once.  Returns 0, or -1 when the result
 *		does not have that shape (b fails).
 */
static int
batch_result(rcv_dbbatch *b, const PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	if (b->single)
	{
		/* one intake() result per delivery, in order */
		rcv_delivery *d = b->next_outcome;

		if (d == NULL || st != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) != 1 ||
			PQgetisnull(res, 0, 0))
			return -1;
		d->status = 200;
		snprintf(d->outcome, sizeof(d->outcome), "%s", PQgetvalue(res, 0, 0));
		b->next_outcome = d->next;
		b->noutcomes++;
		return 0;
	}
	/* intake_batch()'s rows, one result only */
	if (st != PGRES_TUPLES_OK || b->noutcomes != 0)
		return -1;
	return take_outcomes(b, res);
}

/* pipeline.c's hook once batch b is over: answer each of its deliveries. */
static void
batch_done(rcv_dbbatch *b, int committed)
{
	complete_all(b->deliveries, committed);
}

/*
 * A batch is due when it is full, when its first delivery has waited
 * batch-delay, at shutdown, or, while another batch is in flight, when the
 * queue holds a pipeline slot's share (batch_share): then it executes
 * beside that batch, or queued right behind it, instead of after a delay.
 */
static int
batch_due(void)
{
	if (group.nwaiting == 0)
		return 0;
	if (group.nwaiting >= group.cfg->batch_size || group.delay_due || group.stopping ||
		group.cfg->batch_delay_ms == 0)
		return 1;
	return rcv_pipeline_in_flight() > 0 && group.nwaiting >= batch_share();
}

/*
 * kick
 *		pipeline.c's hook after every change of the connections, and ours
 *		after every change of the queue (through rcv_pipeline_kick()).
 *		What waits is answered 503 once no connection is usable (the last
 *		one was lost); otherwise batches go while they are due, each to the
 *		connection rcv_pipeline_free_slot() names.  Arms the batch-delay
 *		timer when deliveries wait but are not due, and calls drained once
 *		nothing waits or is in flight at shutdown.
 */
static void
kick(void)
{
	rcv_pipeline *p;

	if (group.nwaiting > 0 && !rcv_pipeline_any_usable())
		fail_waiting();
	while (batch_due() && (p = rcv_pipeline_free_slot()) != NULL)
		send_batch(p);
	if (group.nwaiting > 0 && !batch_due() &&
		!event_pending(group.delay_ev, EV_TIMEOUT, NULL))
		event_add(group.delay_ev, &group.delay);
	check_drained();
}

static void
delay_elapsed(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	(void) arg;
	group.delay_due = 1;
	rcv_pipeline_kick();
}

/*
 * rcv_batch_init
 *		Set up the batch-delay timer and the connections, which start
 *		connecting.  Returns 0 or -1.
 */
int
rcv_batch_init(struct event_base *base, const rcv_config *cfg,
			   rcv_complete_fn complete, rcv_connections_fn connections)
{
	static const rcv_pipeline_hooks hooks = {batch_result, batch_done, kick};

	memset(&group, 0, sizeof(group));
	group.cfg = cfg;
	group.complete = complete;
	group.connections = connections;
	group.delay.tv_sec = cfg->batch_delay_ms / 1000;
	group.delay.tv_usec = (cfg->batch_delay_ms % 1000) * 1000;
	group.delay_ev = evtimer_new(base, delay_elapsed, NULL);
	if (!group.delay_ev)
		return -1;
	return rcv_pipeline_init(base, cfg, &hooks);
}

/*
 * rcv_batch_submit
 *		Queue a verified delivery for the next transaction.  Returns 0, or -1
 *		when no connection is ready (the caller answers 503 at once; d stays
 *		the caller's).
 */
int
rcv_batch_submit(rcv_delivery *d)
{
	if (!rcv_pipeline_any_usable())
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &d->queued_at);
	d->next = NULL;
	if (group.tail)
		group.tail->next = d;
	else
		group.head = d;
	group.tail = d;
	group.nwaiting++;
	rcv_pipeline_kick();
	return 0;
}

int
rcv_batch_db_ready(void)
{
	return rcv_pipeline_any_usable();
}

int
rcv_batch_sources_loaded(void)
{
	return rcv_pipeline_sources_loaded();
}

int
rcv_batch_sources_failing(void)
{
	return rcv_pipeline_sources_failing();
}

/* SIGHUP: reload the sources as soon as a connection is idle. */
void
rcv_batch_reload_sources(void)
{
	rcv_pipeline_reload_sources();
}

/*
 * rcv_batch_shutdown
 *		Send what is waiting without further delay; call drained once no
 *		delivery is waiting or in flight (possibly right away).
 */
void
rcv_batch_shutdown(void (*drained) (void))
{
	group.stopping = 1;
	group.drained = drained;
	rcv_pipeline_stop();
	/* with no connection usable, kick answers what waits at once */
	rcv_pipeline_kick();
}

void
rcv_batch_free(void)
{
	rcv_pipeline_free();
	for (int i = 0; i < 3; i++)
		free(group.arg[i].data);
	if (group.delay_ev)
		event_free(group.delay_ev);
	memset(&group, 0, sizeof(group));
}
