/*
 * batch.c
 *		Group commit over one libpq connection in pipeline mode, driven by
 *		the event loop: nothing here ever blocks on the database.
 *
 * Work goes to the server in "units", each ended by a pipeline sync:
 *
 *	setup     LISTEN webhook_inbox_sources; PREPARE intake; load sources
 *	sources   load sources (after NOTIFY or SIGHUP)
 *	batch     BEGIN; intake($1,$2,$3) per delivery; COMMIT
 *	rollback  ROLLBACK, after a batch left the session in a failed block
 *
 * Only one unit is in flight at a time.  That is what makes a failure
 * simple: a failed batch cannot poison a following one, and the deliveries
 * that arrive while a batch commits simply form the next batch (classic
 * group commit).  A batch is sent when it is full, when the first delivery
 * in it has waited batch-delay, or at shutdown.
 *
 * The guarantee: a delivery is reported committed only when its batch's
 * COMMIT result came back.  Any error, a lost connection or a silent server
 * (commit-timeout) reports every delivery of the batch as not committed,
 * and the HTTP side answers 503.  While the connection is down, submissions
 * are refused at once, and a reconnect is tried with exponential backoff.
 */
#include "batch.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "log.h"
#include "metrics.h"
#include "sources.h"

#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	2000
#define RELOAD_RETRY_MS 1000
#define NOTIFY_CHANNEL	"webhook_inbox_sources"

/* Type OIDs of intake()'s arguments: text, text[], bytea. */
#define TEXTOID			25
#define TEXTARRAYOID	1009
#define BYTEAOID		17

typedef enum db_state
{
	DB_DOWN,					/* waiting for the reconnect timer */
	DB_CONNECTING,				/* PQconnectPoll in progress */
	DB_READY					/* in pipeline mode */
} db_state;

typedef enum unit_kind
{
	U_NONE,
	U_SETUP,
	U_SOURCES,
	U_BATCH,
	U_ROLLBACK
} unit_kind;

static struct
{
	struct event_base *base;
	const rcv_config *cfg;
	rcv_complete_fn complete;

	PGconn	   *conn;
	db_state	state;
	struct event *read_ev;		/* persistent while READY; one-shot while connecting */
	struct event *write_ev;		/* while libpq has unsent data */
	struct event *retry_ev;		/* reconnect backoff */
	struct event *delay_ev;		/* batch delay */
	struct event *deadline_ev;	/* connect or in-flight unit deadline */
	struct event *reload_ev;	/* retry of a failed source load */
	int			backoff_ms;
	int			ever_connected;

	/* deliveries waiting for a batch */
	rcv_delivery *head;
	rcv_delivery *tail;
	int			nwaiting;
	int			delay_due;

	/* the unit in flight */
	unit_kind	inflight;
	rcv_delivery *batch;
	int			batch_n;
	int			failed;
	int			commit_ok;
	rcv_delivery *next_outcome;
	int			noutcomes;
	struct timespec sent_at;

	int			setup_done;
	int			want_sources;
	int			want_rollback;
	int			sources_loaded;
	int			stopping;
	void		(*drained) (void);
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

/* Hand every delivery of a list back to the HTTP side. */
static void
complete_all(rcv_delivery *list, int committed)
{
	while (list)
	{
		rcv_delivery *next = list->next;

		list->next = NULL;
		db.complete(list, committed);
		list = next;
	}
}

static void
check_drained(void)
{
	if (db.stopping && db.drained && db.nwaiting == 0 && db.inflight != U_BATCH)
	{
		void		(*cb) (void) = db.drained;

		db.drained = NULL;
		cb();
	}
}

/*
 * db_fail
 *		Drop the connection: every delivery in flight or waiting is reported
 *		as not committed, and a reconnect is scheduled with backoff.
 */
static void
db_fail(const char *why)
{
	char		line[200];

	if (db.state == DB_READY || !db.ever_connected || rcv_log_enabled(RCV_LOG_DEBUG))
		rcv_log(db.state == DB_READY ? RCV_LOG_WARNING : RCV_LOG_INFO,
				"database connection %s: %s",
				db.state == DB_READY ? "lost" : "failed",
				first_line(why, line, sizeof(line)));
	if (db.read_ev)
		event_free(db.read_ev);
	if (db.write_ev)
		event_free(db.write_ev);
	db.read_ev = db.write_ev = NULL;
	event_del(db.deadline_ev);
	event_del(db.delay_ev);
	if (db.conn)
		PQfinish(db.conn);
	db.conn = NULL;
	db.state = DB_DOWN;
	rcv_metrics_set_db_up(0);

	if (db.inflight == U_BATCH)
		rcv_metrics_batch(db.batch_n, 0, 0);
	complete_all(db.batch, 0);
	db.batch = NULL;
	db.batch_n = 0;
	db.inflight = U_NONE;
	complete_all(db.head, 0);
	db.head = db.tail = NULL;
	db.nwaiting = 0;
	db.delay_due = 0;
	db.want_rollback = 0;
	db.setup_done = 0;

	check_drained();
	if (db.stopping)
		return;
	add_ms(db.retry_ev, db.backoff_ms);
	db.backoff_ms = db.backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : db.backoff_ms * 2;
}

/* Send what libpq has buffered; watch for writability if it could not. */
static void
db_flush(void)
{
	int			r = PQflush(db.conn);

	if (r < 0)
		db_fail(PQerrorMessage(db.conn));
	else if (r > 0)
		event_add(db.write_ev, NULL);
	else
		event_del(db.write_ev);
}

/* Close a unit: the sync is queued, the deadline armed, the bytes flushed. */
static void
unit_sent(unit_kind kind)
{
	if (!PQpipelineSync(db.conn))
	{
		db_fail(PQerrorMessage(db.conn));
		return;
	}
	db.inflight = kind;
	db.failed = 0;
	db.commit_ok = 0;
	clock_gettime(CLOCK_MONOTONIC, &db.sent_at);
	add_ms(db.deadline_ev, db.cfg->commit_timeout_ms);
	db_flush();
}

static void
send_setup_or_sources(void)
{
	if (!db.setup_done)
	{
		static const Oid types[3] = {TEXTOID, TEXTARRAYOID, BYTEAOID};

		if (!PQsendQueryParams(db.conn, "LISTEN " NOTIFY_CHANNEL, 0, NULL, NULL,
							   NULL, NULL, 0) ||
			!PQsendPrepare(db.conn, "intake",
						   "SELECT webhook_inbox.intake($1, $2, $3)", 3, types))
			goto err;
	}
	if (!PQsendQueryParams(db.conn, rcv_sources_query, 0, NULL, NULL, NULL, NULL, 0))
		goto err;
	db.want_sources = 0;
	unit_sent(db.setup_done ? U_SOURCES : U_SETUP);
	return;
err:
	db_fail(PQerrorMessage(db.conn));
}

/*
 * send_batch
 *		Move up to batch-size waiting deliveries into one transaction.
 */
static void
send_batch(void)
{
	rcv_delivery *d;
	rcv_delivery **tailp = &db.batch;
	int			n = 0;

	if (!PQsendQueryParams(db.conn, "BEGIN", 0, NULL, NULL, NULL, NULL, 0))
		goto err;
	while (db.head && n < db.cfg->batch_size)
	{
		const char *values[3];
		int			lengths[3];
		static const int formats[3] = {0, 0, 1};	/* body goes binary */

		d = db.head;
		db.head = d->next;
		d->next = NULL;
		*tailp = d;
		tailp = &d->next;
		n++;
		db.nwaiting--;

		values[0] = d->source;
		values[1] = d->headers;
		values[2] = (const char *) d->body;
		lengths[0] = lengths[1] = 0;
		lengths[2] = (int) d->len;
		if (!PQsendQueryPrepared(db.conn, "intake", 3, values, lengths, formats, 0))
			goto err;
	}
	if (db.head == NULL)
		db.tail = NULL;
	if (!PQsendQueryParams(db.conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 0))
		goto err;
	db.batch_n = n;
	db.next_outcome = db.batch;
	db.noutcomes = 0;
	/* what is left was already waiting: it goes right after this batch */
	db.delay_due = db.nwaiting > 0;
	if (db.nwaiting == 0)
		event_del(db.delay_ev);
	unit_sent(U_BATCH);
	return;
err:
	/* db.batch holds what was taken; db_fail answers it and the rest */
	db.inflight = U_BATCH;
	db.batch_n = n;
	db_fail(PQerrorMessage(db.conn));
}

/*
 * db_kick
 *		Start the next unit if the connection is idle: a pending rollback
 *		first, then a source load, then a batch if one is due.
 */
static void
db_kick(void)
{
	if (db.state != DB_READY || db.inflight != U_NONE)
		return;
	if (db.want_rollback)
	{
		if (!PQsendQueryParams(db.conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0))
			db_fail(PQerrorMessage(db.conn));
		else
			unit_sent(U_ROLLBACK);
		return;
	}
	if (!db.setup_done || db.want_sources)
	{
		/* after a failed load, wait for the retry timer */
		if (event_pending(db.reload_ev, EV_TIMEOUT, NULL))
		{
			if (!db.setup_done)
				return;
		}
		else
		{
			send_setup_or_sources();
			return;
		}
	}
	if (db.nwaiting == 0)
		return;
	if (db.nwaiting >= db.cfg->batch_size || db.delay_due || db.stopping ||
		db.cfg->batch_delay_ms == 0)
		send_batch();
	else if (!event_pending(db.delay_ev, EV_TIMEOUT, NULL))
		add_ms(db.delay_ev, db.cfg->batch_delay_ms);
}

/* Record one result of the unit in flight. */
static void
handle_result(PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	if (st == PGRES_PIPELINE_ABORTED)
	{
		db.failed = 1;
		return;
	}
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
	{
		db.failed = 1;
		log_result_error(db.inflight == U_BATCH ? "batch" :
						 db.inflight == U_ROLLBACK ? "rollback" : "loading sources", res);
		return;
	}
	if (db.inflight == U_BATCH)
	{
		/* BEGIN, then one row per intake() in order, then COMMIT */
		if (st == PGRES_TUPLES_OK)
		{
			if (db.next_outcome == NULL || PQntuples(res) != 1 ||
				PQgetisnull(res, 0, 0))
			{
				db.failed = 1;
				return;
			}
			snprintf(db.next_outcome->outcome, sizeof(db.next_outcome->outcome),
					 "%s", PQgetvalue(res, 0, 0));
			db.next_outcome = db.next_outcome->next;
			db.noutcomes++;
		}
		else if (strcmp(PQcmdStatus(res), "COMMIT") == 0)
			db.commit_ok = 1;
	}
	else if ((db.inflight == U_SETUP || db.inflight == U_SOURCES) &&
			 st == PGRES_TUPLES_OK && !db.failed)
	{
		rcv_sources *s = rcv_sources_from_result(res);

		if (s == NULL)
		{
			db.failed = 1;
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

/* The sync of the unit in flight arrived: the unit is over. */
static void
unit_done(void)
{
	unit_kind	kind = db.inflight;
	rcv_delivery *batch = db.batch;
	int			ok;

	event_del(db.deadline_ev);
	db.inflight = U_NONE;
	switch (kind)
	{
		case U_BATCH:
			ok = !db.failed && db.commit_ok && db.noutcomes == db.batch_n;
			rcv_metrics_batch(db.batch_n, ok, elapsed_since(&db.sent_at));
			rcv_log(RCV_LOG_DEBUG, "batch of %d %s", db.batch_n,
					ok ? "committed" : "failed");
			db.batch = NULL;
			db.batch_n = 0;
			/* an error inside BEGIN leaves the session in a failed block */
			if (!ok && PQtransactionStatus(db.conn) != PQTRANS_IDLE)
				db.want_rollback = 1;
			complete_all(batch, ok);
			break;
		case U_SETUP:
		case U_SOURCES:
			if (db.failed)
			{
				/* extension not installed yet, or a permission missing */
				db.want_sources = 1;
				add_ms(db.reload_ev, RELOAD_RETRY_MS);
			}
			else
				db.setup_done = 1;
			break;
		case U_ROLLBACK:
			db.want_rollback = 0;
			break;
		case U_NONE:
			break;
	}
	check_drained();
}

/*
 * db_readable
 *		Input on the connection: results of the unit in flight, NOTIFYs, or
 *		the server going away.
 */
static void
db_readable(evutil_socket_t fd, short what, void *arg)
{
	PGnotify   *n;
	int			nulls = 0;

	(void) fd;
	(void) what;
	(void) arg;
	if (!PQconsumeInput(db.conn))
	{
		db_fail(PQerrorMessage(db.conn));
		return;
	}
	while (db.conn && db.inflight != U_NONE && !PQisBusy(db.conn))
	{
		PGresult   *res = PQgetResult(db.conn);

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
			unit_done();
			continue;
		}
		handle_result(res);
		PQclear(res);
	}
	if (db.conn == NULL)
		return;
	while ((n = PQnotifies(db.conn)) != NULL)
	{
		if (strcmp(n->relname, NOTIFY_CHANNEL) == 0)
			db.want_sources = 1;
		PQfreemem(n);
	}
	if (PQstatus(db.conn) == CONNECTION_BAD)
	{
		db_fail(PQerrorMessage(db.conn));
		return;
	}
	db_kick();
}

static void
db_writable(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	(void) arg;
	db_flush();
}

/* The connection is up: enter pipeline mode and run the setup unit. */
static void
db_ready(void)
{
	evutil_socket_t sock = PQsocket(db.conn);

	event_del(db.deadline_ev);
	if (PQsetnonblocking(db.conn, 1) != 0 || !PQenterPipelineMode(db.conn))
	{
		db_fail(PQerrorMessage(db.conn));
		return;
	}
	if (db.read_ev)
		event_free(db.read_ev);
	db.read_ev = event_new(db.base, sock, EV_READ | EV_PERSIST, db_readable, NULL);
	db.write_ev = event_new(db.base, sock, EV_WRITE, db_writable, NULL);
	if (db.read_ev == NULL || db.write_ev == NULL)
	{
		db_fail("out of memory");
		return;
	}
	event_add(db.read_ev, NULL);
	db.state = DB_READY;
	db.ever_connected = 1;
	db.backoff_ms = BACKOFF_MIN_MS;
	rcv_metrics_set_db_up(1);
	rcv_log(RCV_LOG_INFO, "database connection ready");
	db_kick();
}

/* Wait for the socket as PQconnectPoll asked (it may change between polls). */
static void
connect_wait(PostgresPollingStatusType st)
{
	if (db.read_ev)
		event_free(db.read_ev);
	db.read_ev = event_new(db.base, PQsocket(db.conn),
						   st == PGRES_POLLING_READING ? EV_READ : EV_WRITE,
						   db_connect, db.conn);
	if (db.read_ev == NULL)
	{
		db_fail("out of memory");
		return;
	}
	event_add(db.read_ev, NULL);
}

/*
 * db_connect
 *		Start a connection (from the retry timer, arg NULL) or advance one
 *		(from socket readiness, arg the PGconn).
 */
static void
db_connect(evutil_socket_t fd, short what, void *arg)
{
	PostgresPollingStatusType st;

	(void) fd;
	(void) what;
	if (arg == NULL)
	{
		static const char *const keys[] = {"fallback_application_name", "dbname", NULL};
		const char *values[] = {"webhook-receiver", db.cfg->db, NULL};

		if (db.ever_connected)
			rcv_metrics_reconnect();
		db.conn = PQconnectStartParams(keys, values, 1);
		if (db.conn == NULL)
		{
			db_fail("out of memory");
			return;
		}
		if (PQstatus(db.conn) == CONNECTION_BAD)
		{
			db_fail(PQerrorMessage(db.conn));
			return;
		}
		PQsetNoticeReceiver(db.conn, notice_receiver, NULL);
		db.state = DB_CONNECTING;
		add_ms(db.deadline_ev, db.cfg->commit_timeout_ms);
		connect_wait(PGRES_POLLING_WRITING);
		return;
	}
	st = PQconnectPoll(db.conn);
	if (st == PGRES_POLLING_FAILED)
		db_fail(PQerrorMessage(db.conn));
	else if (st == PGRES_POLLING_OK)
		db_ready();
	else
		connect_wait(st);
}

/* The connect attempt or the unit in flight took longer than allowed. */
static void
db_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	(void) arg;
	db_fail(db.state == DB_CONNECTING ? "timed out connecting"
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
 *		Set up the timers and start connecting.  Returns 0 or -1.
 */
int
rcv_batch_init(struct event_base *base, const rcv_config *cfg,
			   rcv_complete_fn complete)
{
	memset(&db, 0, sizeof(db));
	db.base = base;
	db.cfg = cfg;
	db.complete = complete;
	db.backoff_ms = BACKOFF_MIN_MS;
	db.retry_ev = evtimer_new(base, db_connect, NULL);
	db.delay_ev = evtimer_new(base, db_delay_elapsed, NULL);
	db.deadline_ev = evtimer_new(base, db_deadline, NULL);
	db.reload_ev = evtimer_new(base, db_reload_retry, NULL);
	if (!db.retry_ev || !db.delay_ev || !db.deadline_ev || !db.reload_ev)
		return -1;
	add_ms(db.retry_ev, 0);
	return 0;
}

/*
 * rcv_batch_submit
 *		Queue a verified delivery for the next transaction.  Returns 0, or -1
 *		when the database is not ready (the caller answers 503 at once; d
 *		stays the caller's).
 */
int
rcv_batch_submit(rcv_delivery *d)
{
	if (db.state != DB_READY || !db.setup_done)
		return -1;
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
	return db.state == DB_READY && db.setup_done;
}

int
rcv_batch_sources_loaded(void)
{
	return db.sources_loaded;
}

/* SIGHUP: reload the sources as soon as the connection is idle. */
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
	event_del(db.retry_ev);
	if (db.state != DB_READY)
	{
		complete_all(db.head, 0);
		db.head = db.tail = NULL;
		db.nwaiting = 0;
	}
	db_kick();
	check_drained();
}

void
rcv_batch_free(void)
{
	if (db.read_ev)
		event_free(db.read_ev);
	if (db.write_ev)
		event_free(db.write_ev);
	if (db.retry_ev)
		event_free(db.retry_ev);
	if (db.delay_ev)
		event_free(db.delay_ev);
	if (db.deadline_ev)
		event_free(db.deadline_ev);
	if (db.reload_ev)
		event_free(db.reload_ev);
	if (db.conn)
		PQfinish(db.conn);
	memset(&db, 0, sizeof(db));
}
