/*
 * dbconn.c
 *		One libpq connection's life, driven by the event loop: connecting
 *		(PQconnectPoll, within commit-timeout), entering pipeline mode,
 *		flushing what libpq buffered, losing the connection and reconnecting
 *		with exponential backoff.  Nothing here ever blocks on the database.
 *
 * What travels on a ready connection is pipeline.c's: it reads the socket
 * through the readable hook and hears of a lost connection through the
 * lost hook, after which it answers for what was in flight.  Server
 * notices and failed results are logged here, with care for request data.
 */
#include "dbconn.h"

#include <string.h>

#include "log.h"
#include "metrics.h"

#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	2000

static void db_connect(evutil_socket_t fd, short what, void *arg);

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
void
rcv_dbconn_log_error(const char *what, const PGresult *res)
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

/*
 * rcv_dbconn_fail
 *		Drop connection c and schedule its reconnect with backoff (unless
 *		stopping); then the lost hook.  why is the reason for the log line,
 *		libpq's message or our own.
 */
void
rcv_dbconn_fail(rcv_dbconn *c, const char *why)
{
	char		line[200];

	if (c->state == RCV_DB_READY || !c->ever_connected || rcv_log_enabled(RCV_LOG_DEBUG))
		rcv_log(c->state == RCV_DB_READY ? RCV_LOG_WARNING : RCV_LOG_INFO,
				"database connection %d %s: %s", c->no,
				c->state == RCV_DB_READY ? "lost" : "failed",
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
	c->state = RCV_DB_DOWN;
	if (!c->stopping)
	{
		add_ms(c->retry_ev, c->backoff_ms);
		c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
	}
	c->hooks->lost(c->arg);
}

/* Send what libpq has buffered; watch for writability if it could not. */
void
rcv_dbconn_flush(rcv_dbconn *c)
{
	int			r = PQflush(c->conn);

	if (r < 0)
		rcv_dbconn_fail(c, PQerrorMessage(c->conn));
	else if (r > 0)
		event_add(c->write_ev, NULL);
	else
		event_del(c->write_ev);
}

static void
db_writable(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	rcv_dbconn_flush(arg);
}

/* The connection is up: enter pipeline mode and hand it to its owner. */
static void
db_ready(rcv_dbconn *c)
{
	evutil_socket_t sock = PQsocket(c->conn);

	event_del(c->deadline_ev);
	if (PQsetnonblocking(c->conn, 1) != 0 || !PQenterPipelineMode(c->conn))
	{
		rcv_dbconn_fail(c, PQerrorMessage(c->conn));
		return;
	}
	if (c->sock_ev)
		event_free(c->sock_ev);
	c->sock_ev = event_new(c->base, sock, EV_READ | EV_PERSIST, c->hooks->readable, c->arg);
	c->write_ev = event_new(c->base, sock, EV_WRITE, db_writable, c);
	if (c->sock_ev == NULL || c->write_ev == NULL)
	{
		rcv_dbconn_fail(c, "out of memory");
		return;
	}
	event_add(c->sock_ev, NULL);
	c->state = RCV_DB_READY;
	c->ever_connected = 1;
	c->backoff_ms = BACKOFF_MIN_MS;
	c->hooks->ready(c->arg);
}

/* Wait for the socket as PQconnectPoll asked (it may change between polls). */
static void
connect_wait(rcv_dbconn *c, PostgresPollingStatusType st)
{
	if (c->sock_ev)
		event_free(c->sock_ev);
	c->sock_ev = event_new(c->base, PQsocket(c->conn),
						   st == PGRES_POLLING_READING ? EV_READ : EV_WRITE,
						   db_connect, c);
	if (c->sock_ev == NULL)
	{
		rcv_dbconn_fail(c, "out of memory");
		return;
	}
	event_add(c->sock_ev, NULL);
}

/*
 * db_connect
 *		Start a connection (from the retry timer) or advance one (from
 *		socket readiness); arg is the rcv_dbconn.
 */
static void
db_connect(evutil_socket_t fd, short what, void *arg)
{
	rcv_dbconn *c = arg;
	PostgresPollingStatusType st;

	(void) fd;
	if (what & EV_TIMEOUT)
	{
		static const char *const keys[] = {"fallback_application_name", "dbname", NULL};
		const char *values[] = {"webhook-receiver", c->cfg->db, NULL};

		if (c->ever_connected)
			rcv_metrics_reconnect();
		c->conn = PQconnectStartParams(keys, values, 1);
		if (c->conn == NULL)
		{
			rcv_dbconn_fail(c, "out of memory");
			return;
		}
		if (PQstatus(c->conn) == CONNECTION_BAD)
		{
			rcv_dbconn_fail(c, PQerrorMessage(c->conn));
			return;
		}
		PQsetNoticeReceiver(c->conn, notice_receiver, NULL);
		c->state = RCV_DB_CONNECTING;
		add_ms(c->deadline_ev, c->cfg->commit_timeout_ms);
		connect_wait(c, PGRES_POLLING_WRITING);
		return;
	}
	st = PQconnectPoll(c->conn);
	if (st == PGRES_POLLING_FAILED)
		rcv_dbconn_fail(c, PQerrorMessage(c->conn));
	else if (st == PGRES_POLLING_OK)
		db_ready(c);
	else
		connect_wait(c, st);
}

/* The connect attempt took longer than allowed. */
static void
db_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	rcv_dbconn_fail(arg, "timed out connecting");
}

/*
 * rcv_dbconn_init
 *		Set up connection c (number no, for log lines) and start connecting
 *		it; hooks must outlive it, and arg is what they are called with.
 *		Returns 0 or -1 (rcv_dbconn_free() cleans up either way).
 */
int
rcv_dbconn_init(rcv_dbconn *c, int no, struct event_base *base,
				const rcv_config *cfg, const rcv_dbconn_hooks *hooks, void *arg)
{
	*c = (rcv_dbconn) {
		.no = no, .base = base, .cfg = cfg, .hooks = hooks, .arg = arg,
		.backoff_ms = BACKOFF_MIN_MS
	};
	c->retry_ev = evtimer_new(base, db_connect, c);
	c->deadline_ev = evtimer_new(base, db_deadline, c);
	if (!c->retry_ev || !c->deadline_ev)
		return -1;
	add_ms(c->retry_ev, 0);
	return 0;
}

/* Shutting down: once lost, c stays down. */
void
rcv_dbconn_stop(rcv_dbconn *c)
{
	c->stopping = 1;
	event_del(c->retry_ev);
}

void
rcv_dbconn_free(rcv_dbconn *c)
{
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
	memset(c, 0, sizeof(*c));
}
