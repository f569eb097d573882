/*
 * batch.c
 *		Group commit over libpq connections in pipeline mode, driven by the
 *		event loop: nothing here ever blocks on the database.
 *
 * Each of the --db-connections connections sends work in "units", each
 * ended by a pipeline sync:
 *
 *	setup     synchronous_commit guard; LISTEN webhook_inbox_sources;
 *	          does intake_batch() exist; load sources
 *	prepare   PREPARE intake_batch (or 0.1.0's intake, see below)
 *	sources   load sources (after NOTIFY or SIGHUP)
 *	batch     intake_batch($1, $2, $3) for the whole batch, alone in its
 *	          implicit transaction: the sync commits it
 *	rollback  ROLLBACK, should a unit ever leave the session in a failed block
 *	probe     does intake_batch() exist now, on a connection that fell back
 *
 * A batch is one statement, whatever its size: its sources, headers and
 * bodies travel as three arrays in PostgreSQL's binary array format (no
 * escaping of the bodies), and intake_batch() writes them set-based and
 * returns one outcome per delivery, in order.  A delivery's own fault (an
 * over-long id, a source disabled since the last load) is its own answer,
 * 4xx, and never touches its batch-mates; intake_batch() writes rows in
 * a stable key order, so batches on different connections cannot deadlock.
 *
 * A connection carries up to --db-pipeline batches at once (and may carry
 * a sources load behind them); their results come back in order.  The
 * server starts a batch as soon as the one before it committed, instead
 * of waiting a round trip for it: while the answers of one batch travel
 * and its clients send their next requests, the next batch executes.
 * Each batch ends at its own sync, so a failed batch is rolled back there
 * and cannot poison the one after it.  Deliveries wait in one shared
 * queue; the connection with the fewest batches in flight takes the next
 * batch.  A batch is due when it is full, when its first delivery has
 * waited batch-delay, at shutdown, or, while batches are in flight, when
 * the queue holds one pipeline slot's share (see batch_share).  Every
 * connection runs the setup unit after (re)connecting, so a NOTIFY missed
 * while disconnected cannot leave the sources stale.
 *
 * The guarantee: a delivery is reported committed only when its batch's
 * sync came back with no error: the server reports the sync only after
 * the implicit transaction committed (with synchronous_commit on, after
 * the WAL flush).  Any error, a lost connection or a silent server
 * (commit-timeout) reports every delivery of the batch as not committed,
 * and the HTTP side answers 503; a lost connection so reports every batch
 * it carried.  While no connection is ready, submissions are refused at
 * once; each connection reconnects by itself with exponential backoff.
 *
 * A database whose extension is still at release 0.1.0 (the new packages
 * are installed, ALTER EXTENSION UPDATE has not run yet) has no
 * intake_batch(); the setup asks (to_regprocedure, so that no statement
 * fails and the server logs no error).  The connection then prepares
 * 0.1.0's intake() instead and sends one call per delivery,
 * all of a batch's calls before one sync: still one transaction and one
 * commit per batch, and still no 2xx before it.  (A delivery intake()
 * refuses, a source unknown or disabled since our last load, fails its
 * batch in this mode: every delivery of it is answered 503, the sources
 * are reloaded, and the retry is answered 404 by us.)  Such a connection
 * tries intake_batch again (a probe unit) on a NOTIFY of the sources
 * channel (the upgrade sends one), every PROBE_INTERVAL_MS, and after a
 * failed batch; once it exists, the connection prepares it and batches
 * with it again.  A reconnect asks anew.
 */
#include "batch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "encode.h"
#include "log.h"
#include "metrics.h"
#include "sources.h"

#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	2000
#define RELOAD_RETRY_MS 1000
#define NOTIFY_CHANNEL	"webhook_inbox_sources"
#define PROBE_INTERVAL_MS 5000
#define SQLSTATE_UNDEFINED_FUNCTION "42883"
#define HAS_BATCH_QUERY "SELECT to_regprocedure('webhook_inbox.intake_batch(text[],text[],bytea[])')" \
	" IS NOT NULL AS has_intake_batch"

/* Type OIDs of intake_batch()'s arguments: text[], text[], bytea[]. */
#define TEXTOID			25
#define BYTEAOID		17
#define TEXTARRAYOID	1009
#define BYTEAARRAYOID	1001

/* A batch stops growing at this many body bytes (a parameter must stay far below 1 GB). */
#define BATCH_MAX_BYTES (64 * 1024 * 1024)

typedef enum db_state
{
	DB_DOWN,					/* waiting for the reconnect timer */
	DB_CONNECTING,				/* PQconnectPoll in progress */
	DB_READY					/* in pipeline mode */
} db_state;

typedef enum unit_kind
{
	U_SETUP,
	U_SOURCES,
	U_BATCH,
	U_ROLLBACK,
	U_PROBE,
	U_PREPARE
} unit_kind;

/* A unit sent on a connection whose sync has not come back yet. */
typedef struct dbunit
{
	unit_kind	kind;
	rcv_delivery *batch;		/* U_BATCH: its deliveries, in order */
	int			batch_n;
	int			noutcomes;		/* rows of intake_batch() taken */
	int			single;			/* U_BATCH: sent as one intake() per delivery */
	rcv_delivery *next_outcome;	/* single: whose intake() answers next */
	int			failed;
	int			has_batch;		/* U_SETUP, U_PROBE: intake_batch() exists */
	int			undefined_function; /* failed with SQLSTATE 42883 */
	int			prepare_single; /* U_PREPARE: 0.1.0's intake(), not intake_batch() */
	struct timespec sent_at;
} dbunit;

/*
 * Batches, and one setup, sources or rollback unit; on a connection that
 * fell back to intake(), a probe or prepare unit besides.
 */
#define UNITS_MAX (RCV_PIPELINE_MAX + 2)

/* One database connection and the units it has in flight, oldest first. */
typedef struct dbconn
{
	int			no;				/* for log lines */
	PGconn	   *conn;
	db_state	state;
	struct event *sock_ev;		/* persistent read while READY; one-shot while connecting */
	struct event *write_ev;		/* while libpq has unsent data */
	struct event *retry_ev;		/* reconnect backoff */
	struct event *deadline_ev;	/* connect or in-flight unit deadline */
	int			backoff_ms;
	int			ever_connected;
	int			setup_done;
	int			want_rollback;
	int			single;			/* no intake_batch(): intake() per delivery */
	int			want_probe;		/* single: ask again whether intake_batch() exists */
	int			want_prepare;	/* setup done: the batch statement to prepare */
	int			want_prepare_batch; /* single: intake_batch() appeared, prepare it */

	dbunit		units[UNITS_MAX];	/* a ring: units[first] is the oldest */
	int			first;
	int			nunits;
	int			nbatches;		/* of them, batches */
} dbconn;

static struct
{
	struct event_base *base;
	const rcv_config *cfg;
	rcv_complete_fn complete;
	rcv_connections_fn connections;
	dbconn	   *conns;
	int			nconns;
	int			next_conn;		/* round-robin start for batches */

	/* deliveries waiting for a batch */
	rcv_delivery *head;
	rcv_delivery *tail;
	int			nwaiting;
	int			delay_due;
	struct event *delay_ev;

	int			want_sources;
	int			sources_loaded;
	struct event *reload_ev;	/* retry of a failed source load */
	struct event *probe_ev;		/* PROBE_INTERVAL_MS, while a connection is single */
	int			stopping;
	void		(*drained) (void);

	/* the three array parameters of a batch, reused */
	rcv_abuf	arg[3];
} db;

static void db_connect(evutil_socket_t fd, short what, void *arg);
static void db_kick(void);

static double
elapsed_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double) (now.tv_sec - t0->tv_sec) +
		(double) (now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void
add_ms(struct event *ev, long ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	event_add(ev, &tv);
}

/* First line of libpq's error message, for a log line. */
static const char *
first_line(const char *msg, char *buf, size_t size)
{
	size_t		n = strcspn(msg ? msg : "", "\n");

	if (n >= size)
		n = size - 1;
	memcpy(buf, msg ? msg : "", n);
	buf[n] = '\0';
	return buf;
}

/*
 * Log a failed result without leaking request data: a data exception
 * (class 22, e.g. a malformed value) may quote the value, so for those only
 * the SQLSTATE is logged.
 */
static void
log_result_error(const char *what, const PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	char		line[200];

	rcv_metrics_db_error(state);
	if (state && strncmp(state, "22", 2) == 0)
		msg = "(message withheld: it may quote request data)";
	rcv_log(RCV_LOG_WARNING, "%s failed: SQLSTATE %s: %s", what,
			state ? state : "?", first_line(msg, line, sizeof(line)));
}

/*
 * Server notices and warnings (e.g. "terminating connection due to
 * administrator command") go to our log instead of libpq's stderr default,
 * with the same care for request data as errors.
 */
static void
notice_receiver(void *arg, const PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	char		line[200];

	(void) arg;
	if (state && strncmp(state, "22", 2) == 0)
		msg = "(message withheld: it may quote request data)";
	rcv_log(sev && strcmp(sev, "NOTICE") != 0 ? RCV_LOG_WARNING : RCV_LOG_DEBUG,
			"database %s: SQLSTATE %s: %s", sev ? sev : "notice",
			state ? state : "?", first_line(msg, line, sizeof(line)));
}

/* Hand every delivery of a list back to the HTTP side, timing each. */
static void
complete_all(rcv_delivery *list, int committed)
{
	while (list)
	{
		rcv_delivery *next = list->next;

		list->next = NULL;
		rcv_metrics_delivery(elapsed_since(&list->queued_at));
		db.complete(list, committed);
		list = next;
	}
}

/* A connection that can take a unit now or soon. */
static int
usable(const dbconn *c)
{
	return c->state == DB_READY && c->setup_done;
}

static int
any_usable(void)
{
	for (int i = 0; i < db.nconns; i++)
		if (usable(&db.conns[i]))
			return 1;
	return 0;
}

static int
batches_in_flight(void)
{
	for (int i = 0; i < db.nconns; i++)
		if (db.conns[i].nbatches > 0)
			return 1;
	return 0;
}

/* The oldest unit in flight on c, whose results come next (nunits > 0). */
static dbunit *
oldest(dbconn *c)
{
	return &c->units[c->first];
}

/* A new unit behind those in flight on c (nunits < UNITS_MAX). */
static dbunit *
unit_push(dbconn *c, unit_kind kind)
{
	dbunit	   *u = &c->units[(c->first + c->nunits) % UNITS_MAX];

	memset(u, 0, sizeof(*u));
	u->kind = kind;
	c->nunits++;
	if (kind == U_BATCH)
		c->nbatches++;
	return u;
}

/* Drop the oldest unit of c (its sync came back, or c failed). */
static void
unit_pop(dbconn *c)
{
	if (oldest(c)->kind == U_BATCH)
		c->nbatches--;
	c->first = (c->first + 1) % UNITS_MAX;
	c->nunits--;
}

static void
update_db_up(void)
{
	rcv_metrics_set_db_up(any_usable());
}

static void
check_drained(void)
{
	if (db.stopping && db.drained && db.nwaiting == 0 && !batches_in_flight())
	{
		void		(*cb) (void) = db.drained;

		db.drained = NULL;
		cb();
	}
}

/* Answer 503 to everything waiting (no connection can take it). */
static void
fail_waiting(void)
{
	complete_all(db.head, 0);
	db.head = db.tail = NULL;
	db.nwaiting = 0;
	db.delay_due = 0;
	event_del(db.delay_ev);
}

/*
 * db_fail
 *		Drop connection c: its batches in flight are reported as not
 *		committed, and so is everything waiting if no other connection is
 *		usable; a reconnect is scheduled with backoff.
 */
static void
db_fail(dbconn *c, const char *why)
{
	char		line[200];

	if (c->state == DB_READY || !c->ever_connected || rcv_log_enabled(RCV_LOG_DEBUG))
		rcv_log(c->state == DB_READY ? RCV_LOG_WARNING : RCV_LOG_INFO,
				"database connection %d %s: %s", c->no,
				c->state == DB_READY ? "lost" : "failed",
				first_line(why, line, sizeof(line)));
	if (c->sock_ev)
		event_free(c->sock_ev);
	if (c->write_ev)
		event_free(c->write_ev);
	c->sock_ev = c->write_ev = NULL;
	event_del(c->deadline_ev);
	if (c->conn)
		PQfinish(c->conn);
	c->conn = NULL;
	c->state = DB_DOWN;
	c->setup_done = 0;
	c->want_rollback = 0;
	c->single = 0;				/* a reconnect asks again */
	c->want_probe = 0;
	c->want_prepare = 0;
	c->want_prepare_batch = 0;

	while (c->nunits > 0)
	{
		dbunit	   *u = oldest(c);
		rcv_delivery *batch = u->batch;

		if (u->kind == U_BATCH)
			rcv_metrics_batch(u->batch_n, 0, 0);
		u->batch = NULL;
		unit_pop(c);
		complete_all(batch, 0);
	}
	update_db_up();
	if (!any_usable())
		fail_waiting();

	check_drained();
	if (!db.stopping)
	{
		add_ms(c->retry_ev, c->backoff_ms);
		c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
	}
	/* the others may take what is waiting */
	db_kick();
}

/* Send what libpq has buffered; watch for writability if it could not. */
static void
db_flush(dbconn *c)
{
	int			r = PQflush(c->conn);

	if (r < 0)
		db_fail(c, PQerrorMessage(c->conn));
	else if (r > 0)
		event_add(c->write_ev, NULL);
	else
		event_del(c->write_ev);
}

/*
 * Close unit u, the newest on c: the sync is queued, the bytes flushed.
 * The deadline runs for the oldest unit; a unit behind others gets its own
 * when its turn comes (unit_done).
 */
static void
unit_sent(dbconn *c, dbunit *u)
{
	if (!PQpipelineSync(c->conn))
	{
		db_fail(c, PQerrorMessage(c->conn));
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &u->sent_at);
	if (c->nunits == 1)
		add_ms(c->deadline_ev, db.cfg->commit_timeout_ms);
	db_flush(c);
}

/*
 * PREPARE the batch statement, alone before its sync: intake_batch(), or on
 * a single connection 0.1.0's intake(source, headers, body).
 */
static void
send_prepare(dbconn *c, int single)
{
	static const Oid batch_types[3] = {TEXTARRAYOID, TEXTARRAYOID, BYTEAARRAYOID};
	static const Oid single_types[3] = {TEXTOID, TEXTARRAYOID, BYTEAOID};
	dbunit	   *u = unit_push(c, U_PREPARE);
	int			ok;

	u->prepare_single = single;
	if (single)
		ok = PQsendPrepare(c->conn, "intake", "SELECT webhook_inbox.intake($1, $2, $3)", 3, single_types);
	else
		ok = PQsendPrepare(c->conn, "intake_batch",
						   "SELECT ord, outcome, reason FROM webhook_inbox.intake_batch($1, $2, $3)",
						   3, batch_types);
	if (!ok)
	{
		db_fail(c, PQerrorMessage(c->conn));
		return;
	}
	unit_sent(c, u);
}

/* A single connection asks again whether intake_batch() exists. */
static void
send_probe(dbconn *c)
{
	dbunit	   *u = unit_push(c, U_PROBE);

	c->want_probe = 0;
	if (!PQsendQueryParams(c->conn, HAS_BATCH_QUERY, 0, NULL, NULL, NULL, NULL, 0))
	{
		db_fail(c, PQerrorMessage(c->conn));
		return;
	}
	unit_sent(c, u);
}

static void
send_setup_or_sources(dbconn *c)
{
	int			setup = !c->setup_done;
	dbunit	   *u = unit_push(c, setup ? U_SETUP : U_SOURCES);

	if (setup)
	{
		/*
		 * An acknowledgement promises durability: with synchronous_commit
		 * off, COMMIT returns before the WAL is flushed, so this session
		 * turns it back on (any stronger setting is left as it is).
		 */
		if (!PQsendQueryParams(c->conn,
							   "SELECT set_config('synchronous_commit', 'on', false)"
							   " WHERE current_setting('synchronous_commit') = 'off'",
							   0, NULL, NULL, NULL, NULL, 0) ||
			!PQsendQueryParams(c->conn, "LISTEN " NOTIFY_CHANNEL, 0, NULL, NULL,
							   NULL, NULL, 0) ||
			!PQsendQueryParams(c->conn, HAS_BATCH_QUERY, 0, NULL, NULL, NULL, NULL, 0))
			goto err;
	}
	if (!PQsendQueryParams(c->conn, rcv_sources_query, 0, NULL, NULL, NULL, NULL, 0))
		goto err;
	db.want_sources = 0;
	unit_sent(c, u);
	return;
err:
	db_fail(c, PQerrorMessage(c->conn));
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
	if (rcv_abuf_start(&db.arg[0], 1, dims, 0, TEXTOID) < 0 ||
		rcv_abuf_start(&db.arg[1], width ? 2 : 0, dims, 1, TEXTOID) < 0 ||
		rcv_abuf_start(&db.arg[2], 1, dims, 0, BYTEAOID) < 0)
		return -1;
	for (rcv_delivery *d = list; d; d = d->next)
	{
		if (rcv_abuf_elem(&db.arg[0], d->source, strlen(d->source)) < 0 ||
			rcv_abuf_add(&db.arg[1], d->headers, d->headers_len) < 0 ||
			rcv_abuf_elem(&db.arg[2], d->body, d->len) < 0)
			return -1;
		for (int k = d->npairs * 2; k < width; k++)
			if (rcv_abuf_int(&db.arg[1], -1) < 0)
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
	int			slots = 0;
	long		waiting = db.nwaiting;
	long		share;

	for (int k = 0; k < db.nconns; k++)
	{
		const dbconn *c = &db.conns[k];

		for (int i = 0; i < c->nunits; i++)
			waiting += c->units[(c->first + i) % UNITS_MAX].batch_n;
		if (usable(c))
			slots += (int) db.cfg->db_pipeline;
	}
	if (slots == 0)
		slots = 1;
	if (waiting < db.connections())
		waiting = db.connections();
	share = (waiting + slots - 1) / slots;
	if (share > db.cfg->batch_size)
		share = db.cfg->batch_size;
	return share < 1 ? 1 : (int) share;
}

/*
 * send_batch_single
 *		The deliveries of u as one intake() call each, on a connection whose
 *		database has no intake_batch() (0.1.0): all before u's one sync, so
 *		one transaction.  Each call's arguments are its source, its headers
 *		as a one-dimensional text[] and its body, in binary.  Returns 0, or
 *		-1 when libpq refused (its error message says why) or memory ran out.
 */
static int
send_batch_single(dbconn *c, dbunit *u)
{
	static const int formats[3] = {1, 1, 1};

	u->single = 1;
	u->next_outcome = u->batch;
	for (rcv_delivery *d = u->batch; d; d = d->next)
	{
		int			dims[1] = {d->npairs * 2};
		const char *values[3];
		int			lengths[3];

		if (rcv_abuf_start(&db.arg[1], d->npairs > 0 ? 1 : 0, dims, 0, TEXTOID) < 0 ||
			rcv_abuf_add(&db.arg[1], d->headers, d->headers_len) < 0)
			return -1;
		values[0] = d->source;
		lengths[0] = (int) strlen(d->source);
		values[1] = db.arg[1].data;
		lengths[1] = (int) db.arg[1].len;
		values[2] = (const char *) d->body;
		lengths[2] = (int) d->len;
		if (!PQsendQueryPrepared(c->conn, "intake", 3, values, lengths, formats, 0))
			return -1;
	}
	return 0;
}

/*
 * send_batch
 *		Move up to a slot's share of the waiting deliveries (at most
 *		batch-size, and about BATCH_MAX_BYTES of bodies) into one
 *		transaction on c: one intake_batch() call, committed at its sync.
 */
static void
send_batch(dbconn *c)
{
	rcv_delivery *d;
	int			limit = batch_share();
	dbunit	   *u = unit_push(c, U_BATCH);
	rcv_delivery **tailp = &u->batch;
	int			n = 0;
	size_t		bytes = 0;
	const char *values[3];
	int			lengths[3];
	static const int formats[3] = {1, 1, 1};

	while (db.head && n < limit &&
		   (n == 0 || bytes + db.head->len <= BATCH_MAX_BYTES))
	{
		d = db.head;
		db.head = d->next;
		d->next = NULL;
		*tailp = d;
		tailp = &d->next;
		n++;
		bytes += d->len;
		db.nwaiting--;
		u->batch_n = n;
	}
	if (db.head == NULL)
		db.tail = NULL;
	if (c->single)
	{
		if (send_batch_single(c, u) < 0)
			goto err;
	}
	else
	{
		if (encode_batch(u->batch, n) < 0)
		{
			db_fail(c, "out of memory");
			return;
		}
		for (int i = 0; i < 3; i++)
		{
			values[i] = db.arg[i].data;
			lengths[i] = (int) db.arg[i].len;
		}
		if (!PQsendQueryPrepared(c->conn, "intake_batch", 3, values, lengths, formats, 0))
			goto err;
	}
	/* what is left was already waiting: the next free slot takes it */
	db.delay_due = db.nwaiting > 0;
	if (db.nwaiting == 0)
		event_del(db.delay_ev);
	unit_sent(c, u);
	return;
err:
	/* u holds what was taken; db_fail answers it */
	db_fail(c, PQerrorMessage(c->conn));
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
}

/*
 * Take intake_batch()'s rows: one per delivery of u's batch, in order.
 * Returns 0, or -1 when the result does not have that shape.
 */
static int
take_outcomes(dbunit *u, const PGresult *res)
{
	rcv_delivery *d = u->batch;

	if (PQntuples(res) != u->batch_n || PQnfields(res) != 3)
		return -1;
	for (int i = 0; i < u->batch_n; i++, d = d->next)
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
	u->noutcomes = u->batch_n;
	return 0;
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
	if (db.nwaiting == 0)
		return 0;
	if (db.nwaiting >= db.cfg->batch_size || db.delay_due || db.stopping ||
		db.cfg->batch_delay_ms == 0)
		return 1;
	return batches_in_flight() && db.nwaiting >= batch_share();
}

/*
 * A connection that can take one more batch: usable, no rollback to send
 * first, fewer than --db-pipeline batches in flight.
 */
static int
has_slot(const dbconn *c)
{
	return usable(c) && !c->want_rollback && c->nunits < UNITS_MAX &&
		c->nbatches < db.cfg->db_pipeline;
}

/*
 * db_kick
 *		Give work to the connections: a pending rollback or the setup on an
 *		idle one, a sources load behind what is in flight (on one
 *		connection), then batches while they are due, each to the connection
 *		with the fewest in flight.  Arms the batch-delay timer when
 *		deliveries wait but are not due.
 */
static void
db_kick(void)
{
	for (int k = 0; k < db.nconns; k++)
	{
		dbconn	   *c = &db.conns[k];

		if (c->state != DB_READY)
			continue;
		if (c->want_rollback)
		{
			if (c->nunits == 0)
			{
				dbunit	   *u = unit_push(c, U_ROLLBACK);

				if (!PQsendQueryParams(c->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0))
					db_fail(c, PQerrorMessage(c->conn));
				else
					unit_sent(c, u);
			}
			continue;
		}
		if (!c->setup_done)
		{
			/* after a failed setup, wait for the retry timer */
			if (c->nunits == 0 && c->want_prepare)
			{
				c->want_prepare = 0;
				send_prepare(c, c->single);
			}
			else if (c->nunits == 0 && !event_pending(db.reload_ev, EV_TIMEOUT, NULL))
				send_setup_or_sources(c);
			continue;
		}
		if (db.want_sources && c->nunits < UNITS_MAX &&
			!event_pending(db.reload_ev, EV_TIMEOUT, NULL))
			send_setup_or_sources(c);
		if (c->state == DB_READY && c->single && c->want_prepare_batch && c->nunits < UNITS_MAX)
		{
			c->want_prepare_batch = 0;
			send_prepare(c, 0);
		}
		if (c->state == DB_READY && c->single && c->want_probe && c->nunits < UNITS_MAX)
			send_probe(c);
	}
	while (batch_due())
	{
		dbconn	   *best = NULL;

		for (int k = 0; k < db.nconns; k++)
		{
			dbconn	   *c = &db.conns[(db.next_conn + k) % db.nconns];

			if (has_slot(c) && (best == NULL || c->nbatches < best->nbatches))
				best = c;
		}
		if (best == NULL)
			break;
		db.next_conn = (int) (best - db.conns + 1) % db.nconns;
		send_batch(best);
	}
	if (db.nwaiting > 0 && !batch_due() &&
		!event_pending(db.delay_ev, EV_TIMEOUT, NULL))
		add_ms(db.delay_ev, db.cfg->batch_delay_ms);
}

/*
 * Record one result of c's oldest unit.  An error at the sync itself (a
 * failed commit) comes as an error result before the sync, so it fails the
 * unit like any other.
 */
static void
handle_result(dbconn *c, PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);
	dbunit	   *u = oldest(c);

	if (st == PGRES_PIPELINE_ABORTED)
	{
		u->failed = 1;
		return;
	}
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		u->failed = 1;
		if (state && strcmp(state, SQLSTATE_UNDEFINED_FUNCTION) == 0)
			u->undefined_function = 1;
		log_result_error(u->kind == U_BATCH ? "batch" :
						 u->kind == U_ROLLBACK ? "rollback" :
						 u->kind == U_PREPARE ? "preparing the batch statement" :
						 u->kind == U_PROBE ? "asking for intake_batch()" : "loading sources", res);
		return;
	}
	if ((u->kind == U_SETUP || u->kind == U_PROBE) && st == PGRES_TUPLES_OK &&
		PQnfields(res) == 1 && strcmp(PQfname(res, 0), "has_intake_batch") == 0)
	{
		u->has_batch = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		return;
	}
	if (u->kind == U_BATCH && u->single)
	{
		/* one intake() result per delivery, in order */
		rcv_delivery *d = u->next_outcome;

		if (d == NULL || st != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) != 1 ||
			PQgetisnull(res, 0, 0))
		{
			u->failed = 1;
			rcv_log(RCV_LOG_WARNING, "batch failed: unexpected result shape");
			return;
		}
		d->status = 200;
		snprintf(d->outcome, sizeof(d->outcome), "%s", PQgetvalue(res, 0, 0));
		u->next_outcome = d->next;
		u->noutcomes++;
	}
	else if (u->kind == U_BATCH)
	{
		/* intake_batch()'s rows, one result only */
		if (st != PGRES_TUPLES_OK || u->noutcomes != 0 || take_outcomes(u, res) < 0)
		{
			u->failed = 1;
			rcv_log(RCV_LOG_WARNING, "batch failed: unexpected result shape");
		}
	}
	else if ((u->kind == U_SETUP || u->kind == U_SOURCES) &&
			 st == PGRES_TUPLES_OK && !u->failed &&
			 PQnfields(res) > 1)	/* not the synchronous_commit guard */
	{
		rcv_sources *s = rcv_sources_from_result(res);

		if (s == NULL)
		{
			u->failed = 1;
			rcv_log(RCV_LOG_WARNING, "loading sources failed: unexpected result shape");
			return;
		}
		rcv_log(db.sources_loaded ? RCV_LOG_DEBUG : RCV_LOG_INFO,
				"loaded %d source%s", s->n, s->n == 1 ? "" : "s");
		rcv_metrics_sources_loaded(s->n);
		rcv_sources_install(s);
		db.sources_loaded = 1;
	}
}

/*
 * The sync of c's oldest unit arrived: the unit is over, and the next one,
 * if any, gets its deadline.
 */
static void
unit_done(dbconn *c)
{
	dbunit		u = *oldest(c);
	PGTransactionStatusType xs;
	int			ok;

	unit_pop(c);
	if (c->nunits > 0)
		add_ms(c->deadline_ev, db.cfg->commit_timeout_ms);
	else
		event_del(c->deadline_ev);
	/*
	 * Nothing sent opens a transaction block; should one be left, close it.
	 * (With units behind this one, libpq says PQTRANS_ACTIVE.)
	 */
	xs = PQtransactionStatus(c->conn);
	if (xs == PQTRANS_INTRANS || xs == PQTRANS_INERROR)
		c->want_rollback = 1;
	switch (u.kind)
	{
		case U_BATCH:
			ok = !u.failed && u.noutcomes == u.batch_n && !c->want_rollback;
			rcv_metrics_batch(u.batch_n, ok, elapsed_since(&u.sent_at));
			rcv_log(RCV_LOG_DEBUG, "batch of %d %s on connection %d", u.batch_n,
					ok ? "committed" : "failed", c->no);
			complete_all(u.batch, ok);
			if (!ok && u.single)
			{
				/* intake() refused a source we still list, or the update ran */
				db.want_sources = 1;
				c->want_probe = c->single;
			}
			else if (!ok && u.undefined_function)
			{
				/*
				 * The function of the batch statement is gone (the extension
				 * was dropped, or is another release's): a new session asks
				 * again which one to use.
				 */
				db_fail(c, "the batch statement's function does not exist (SQLSTATE 42883): reconnecting");
				return;
			}
			break;
		case U_SETUP:
		case U_SOURCES:
			if (u.failed)
			{
				/* extension not installed yet, or a permission missing */
				db.want_sources = 1;
				if (!event_pending(db.reload_ev, EV_TIMEOUT, NULL))
					add_ms(db.reload_ev, RELOAD_RETRY_MS);
			}
			else if (u.kind == U_SETUP)
			{
				/* the batch statement next: intake_batch(), or 0.1.0's intake() */
				c->single = !u.has_batch;
				c->want_prepare = 1;
				if (c->single)
				{
					rcv_log(RCV_LOG_WARNING,
							"database connection %d: webhook_inbox.intake_batch() does not exist (the extension "
							"is at an earlier release: run ALTER EXTENSION webhook_inbox UPDATE); writing each "
							"delivery with intake(), one transaction per batch", c->no);
					if (!event_pending(db.probe_ev, EV_TIMEOUT, NULL))
						add_ms(db.probe_ev, PROBE_INTERVAL_MS);
				}
			}
			break;
		case U_PREPARE:
			if (u.failed)
			{
				/* the setup again, after the reload delay */
				if (!c->setup_done)
				{
					c->want_prepare = 0;
					if (!event_pending(db.reload_ev, EV_TIMEOUT, NULL))
						add_ms(db.reload_ev, RELOAD_RETRY_MS);
				}
			}
			else if (!c->setup_done)
			{
				c->setup_done = 1;
				update_db_up();
				rcv_log(RCV_LOG_INFO, "database connection %d ready", c->no);
			}
			else if (!u.prepare_single && c->single)
			{
				c->single = 0;
				rcv_log(RCV_LOG_INFO, "database connection %d: webhook_inbox.intake_batch() exists now, "
						"batches use it again", c->no);
			}
			break;
		case U_ROLLBACK:
			c->want_rollback = 0;
			break;
		case U_PROBE:
			if (!u.failed && u.has_batch && c->single)
				c->want_prepare_batch = 1;
			break;
	}
	check_drained();
}

/*
 * db_readable
 *		Input on connection arg: results of its units in flight, NOTIFYs,
 *		or the server going away.
 */
static void
db_readable(evutil_socket_t fd, short what, void *arg)
{
	dbconn	   *c = arg;
	PGnotify   *n;
	int			nulls = 0;

	(void) fd;
	(void) what;
	if (!PQconsumeInput(c->conn))
	{
		db_fail(c, PQerrorMessage(c->conn));
		return;
	}
	while (c->conn && c->nunits > 0 && !PQisBusy(c->conn))
	{
		PGresult   *res = PQgetResult(c->conn);

		if (res == NULL)
		{
			/* end of one query's results; two in a row: nothing more yet */
			if (++nulls > 1)
				break;
			continue;
		}
		nulls = 0;
		if (PQresultStatus(res) == PGRES_PIPELINE_SYNC)
		{
			PQclear(res);
			unit_done(c);
			continue;
		}
		handle_result(c, res);
		PQclear(res);
	}
	if (c->conn == NULL)
		return;
	while ((n = PQnotifies(c->conn)) != NULL)
	{
		if (strcmp(n->relname, NOTIFY_CHANNEL) == 0)
		{
			db.want_sources = 1;
			for (int k = 0; k < db.nconns; k++)
				db.conns[k].want_probe = db.conns[k].single;
		}
		PQfreemem(n);
	}
	if (PQstatus(c->conn) == CONNECTION_BAD)
	{
		db_fail(c, PQerrorMessage(c->conn));
		return;
	}
	db_kick();
}

static void
db_writable(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	db_flush(arg);
}

/* The connection is up: enter pipeline mode and run the setup unit. */
static void
db_ready(dbconn *c)
{
	evutil_socket_t sock = PQsocket(c->conn);

	event_del(c->deadline_ev);
	if (PQsetnonblocking(c->conn, 1) != 0 || !PQenterPipelineMode(c->conn))
	{
		db_fail(c, PQerrorMessage(c->conn));
		return;
	}
	if (c->sock_ev)
		event_free(c->sock_ev);
	c->sock_ev = event_new(db.base, sock, EV_READ | EV_PERSIST, db_readable, c);
	c->write_ev = event_new(db.base, sock, EV_WRITE, db_writable, c);
	if (c->sock_ev == NULL || c->write_ev == NULL)
	{
		db_fail(c, "out of memory");
		return;
	}
	event_add(c->sock_ev, NULL);
	c->state = DB_READY;
	c->ever_connected = 1;
	c->backoff_ms = BACKOFF_MIN_MS;
	/* a NOTIFY may have been missed while away: setup reloads the sources */
	event_del(db.reload_ev);
	db_kick();
}

/* Wait for the socket as PQconnectPoll asked (it may change between polls). */
static void
connect_wait(dbconn *c, PostgresPollingStatusType st)
{
	if (c->sock_ev)
		event_free(c->sock_ev);
	c->sock_ev = event_new(db.base, PQsocket(c->conn),
						   st == PGRES_POLLING_READING ? EV_READ : EV_WRITE,
						   db_connect, c);
	if (c->sock_ev == NULL)
	{
		db_fail(c, "out of memory");
		return;
	}
	event_add(c->sock_ev, NULL);
}

/*
 * db_connect
 *		Start a connection (from the retry timer) or advance one (from
 *		socket readiness); arg is the dbconn.
 */
static void
db_connect(evutil_socket_t fd, short what, void *arg)
{
	dbconn	   *c = arg;
	PostgresPollingStatusType st;

	(void) fd;
	if (what & EV_TIMEOUT)
	{
		static const char *const keys[] = {"fallback_application_name", "dbname", NULL};
		const char *values[] = {"webhook-receiver", db.cfg->db, NULL};

		if (c->ever_connected)
			rcv_metrics_reconnect();
		c->conn = PQconnectStartParams(keys, values, 1);
		if (c->conn == NULL)
		{
			db_fail(c, "out of memory");
			return;
		}
		if (PQstatus(c->conn) == CONNECTION_BAD)
		{
			db_fail(c, PQerrorMessage(c->conn));
			return;
		}
		PQsetNoticeReceiver(c->conn, notice_receiver, NULL);
		c->state = DB_CONNECTING;
		add_ms(c->deadline_ev, db.cfg->commit_timeout_ms);
		connect_wait(c, PGRES_POLLING_WRITING);
		return;
	}
	st = PQconnectPoll(c->conn);
	if (st == PGRES_POLLING_FAILED)
		db_fail(c, PQerrorMessage(c->conn));
	else if (st == PGRES_POLLING_OK)
		db_ready(c);
	else
		connect_wait(c, st);
}

/* The connect attempt or the unit in flight took longer than allowed. */
static void
db_deadline(evutil_socket_t fd, short what, void *arg)
{
	dbconn	   *c = arg;

	(void) fd;
	(void) what;
	db_fail(c, c->state == DB_CONNECTING ? "timed out connecting"
			: "no answer within commit-timeout");
}

static void
db_delay_elapsed(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	(void) arg;
	db.delay_due = 1;
	db_kick();
}

/* Every PROBE_INTERVAL_MS while any connection is single: probe them. */
static void
db_probe_due(evutil_socket_t fd, short what, void *arg)
{
	int			any = 0;

	(void) fd;
	(void) what;
	(void) arg;
	for (int k = 0; k < db.nconns; k++)
		if (db.conns[k].single)
			db.conns[k].want_probe = any = 1;
	if (any)
		add_ms(db.probe_ev, PROBE_INTERVAL_MS);
	db_kick();
}

static void
db_reload_retry(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	(void) arg;
	db_kick();
}

/*
 * rcv_batch_init
 *		Set up the connections' timers and start connecting.  Returns 0 or -1.
 */
int
rcv_batch_init(struct event_base *base, const rcv_config *cfg,
			   rcv_complete_fn complete, rcv_connections_fn connections)
{
	memset(&db, 0, sizeof(db));
	db.base = base;
	db.cfg = cfg;
	db.complete = complete;
	db.connections = connections;
	db.nconns = (int) cfg->db_connections;
	db.conns = calloc((size_t) db.nconns, sizeof(dbconn));
	db.delay_ev = evtimer_new(base, db_delay_elapsed, NULL);
	db.reload_ev = evtimer_new(base, db_reload_retry, NULL);
	db.probe_ev = evtimer_new(base, db_probe_due, NULL);
	if (!db.conns || !db.delay_ev || !db.reload_ev || !db.probe_ev)
		return -1;
	for (int i = 0; i < db.nconns; i++)
	{
		dbconn	   *c = &db.conns[i];

		c->no = i + 1;
		c->backoff_ms = BACKOFF_MIN_MS;
		c->retry_ev = evtimer_new(base, db_connect, c);
		c->deadline_ev = evtimer_new(base, db_deadline, c);
		if (!c->retry_ev || !c->deadline_ev)
			return -1;
		add_ms(c->retry_ev, 0);
	}
	return 0;
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
	if (!any_usable())
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &d->queued_at);
	d->next = NULL;
	if (db.tail)
		db.tail->next = d;
	else
		db.head = d;
	db.tail = d;
	db.nwaiting++;
	db_kick();
	return 0;
}

int
rcv_batch_db_ready(void)
{
	return any_usable();
}

int
rcv_batch_sources_loaded(void)
{
	return db.sources_loaded;
}

/* SIGHUP: reload the sources as soon as a connection is idle. */
void
rcv_batch_reload_sources(void)
{
	db.want_sources = 1;
	event_del(db.reload_ev);
	db_kick();
}

/*
 * rcv_batch_shutdown
 *		Send what is waiting without further delay; call drained once no
 *		delivery is waiting or in flight (possibly right away).
 */
void
rcv_batch_shutdown(void (*drained) (void))
{
	db.stopping = 1;
	db.drained = drained;
	for (int i = 0; i < db.nconns; i++)
		event_del(db.conns[i].retry_ev);
	if (!any_usable())
		fail_waiting();
	db_kick();
	check_drained();
}

void
rcv_batch_free(void)
{
	for (int i = 0; db.conns && i < db.nconns; i++)
	{
		dbconn	   *c = &db.conns[i];

		if (c->sock_ev)
			event_free(c->sock_ev);
		if (c->write_ev)
			event_free(c->write_ev);
		if (c->retry_ev)
			event_free(c->retry_ev);
		if (c->deadline_ev)
			event_free(c->deadline_ev);
		if (c->conn)
			PQfinish(c->conn);
	}
	free(db.conns);
	for (int i = 0; i < 3; i++)
		free(db.arg[i].data);
	if (db.delay_ev)
		event_free(db.delay_ev);
	if (db.reload_ev)
		event_free(db.reload_ev);
	if (db.probe_ev)
		event_free(db.probe_ev);
	memset(&db, 0, sizeof(db));
}
