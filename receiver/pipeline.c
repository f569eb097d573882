/*
 * pipeline.c
 *		What the receiver's --db-connections connections carry in pipeline
 *		mode: the units of work each has in flight, their results, each
 *		connection's setup, the sources, and which connection takes the next
 *		batch.  The connections themselves (connecting, flushing, losing
 *		and reconnecting) are dbconn.c's; what goes in a batch is batch.c's,
 *		which hears back through the hooks it registered.
 *
 * Each connection sends work in "units", each ended by a pipeline sync:
 *
 *	setup     synchronous_commit guard; LISTEN webhook_inbox_sources;
 *	          does intake_batch() exist; load sources
 *	prepare   PREPARE intake_batch (or 0.1.0's intake, see below)
 *	sources   load sources (after NOTIFY or SIGHUP)
 *	batch     batch.c's statements for one batch, alone in their implicit
 *	          transaction: the sync commits it
 *	rollback  ROLLBACK, should a unit ever leave the session in a failed block
 *	probe     does intake_batch() exist now, on a connection that fell back
 *
 * A connection carries up to --db-pipeline batches at once (and may carry
 * a sources load behind them); their results come back in order.  Each
 * batch ends at its own sync, so a failed batch is rolled back there and
 * cannot poison the one after it.  Every connection runs the setup unit
 * after (re)connecting, so a NOTIFY missed while disconnected cannot leave
 * the sources stale.
 *
 * A batch is reported committed only when its sync came back with no
 * error: the server reports the sync only after the implicit transaction
 * committed (with synchronous_commit on, after the WAL flush).  Any error,
 * a lost connection or a silent server (commit-timeout) reports the batch
 * as not committed; a lost connection so reports every batch it carried.
 *
 * A database whose extension is still at release 0.1.0 (the new packages
 * are installed, ALTER EXTENSION UPDATE has not run yet) has no
 * intake_batch(); the setup asks (to_regprocedure, so that no statement
 * fails and the server logs no error).  The connection then prepares
 * 0.1.0's intake() instead, and batch.c sends one call per delivery on
 * it.  Such a connection tries intake_batch again (a probe unit) on a
 * NOTIFY of the sources channel (the upgrade sends one), every
 * probe_interval (5 s), and after a failed batch; once it exists, the
 * connection prepares it and batches with it again.  A reconnect asks anew.
 */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbconn.h"
#include "log.h"
#include "metrics.h"
#include "sources.h"

#define NOTIFY_CHANNEL	"webhook_inbox_sources"
#define SQLSTATE_UNDEFINED_FUNCTION "42883"
#define HAS_BATCH_QUERY "SELECT to_regprocedure('webhook_inbox.intake_batch(text[],text[],bytea[])')" \
	" IS NOT NULL AS has_intake_batch"

/* The retry of a failed source load; how often a single connection probes. */
static const struct timeval reload_retry = {1, 0};
static const struct timeval probe_interval = {5, 0};

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
	rcv_dbbatch batch;			/* U_BATCH: batch.c's */
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
struct rcv_pipeline
{
	rcv_dbconn	db;				/* its hooks' arg is this pipeline */
	struct event *deadline_ev;	/* of the oldest unit in flight */
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
};

static struct
{
	const rcv_config *cfg;
	rcv_pipeline_hooks hooks;
	rcv_pipeline *pipes;
	int			npipes;
	int			next_pipe;		/* round-robin start for batches */
	struct timeval commit_timeout;	/* a unit's deadline */

	int			want_sources;
	int			sources_loaded;
	int			sources_failing;	/* the last load failed: the sources may be stale */
	struct event *reload_ev;	/* retry of a failed source load */
	struct event *probe_ev;		/* probe_interval, while a connection is single */
} pool;

/* A connection that can take a unit now or soon. */
static int
usable(const rcv_pipeline *p)
{
	return p->db.state == RCV_DB_READY && p->setup_done;
}

/* Can any connection take a batch?  (While none can, submissions are refused.) */
int
rcv_pipeline_any_usable(void)
{
	for (int i = 0; i < pool.npipes; i++)
		if (usable(&pool.pipes[i]))
			return 1;
	return 0;
}

/* The pipeline slots of the usable connections: --db-pipeline batches each. */
int
rcv_pipeline_slots(void)
{
	int			slots = 0;

	for (int k = 0; k < pool.npipes; k++)
		if (usable(&pool.pipes[k]))
			slots += (int) pool.cfg->db_pipeline;
	return slots;
}

/*
 * How many deliveries the batches in flight carry, on all connections
 * (other units carry none; every batch carries one at least).
 */
long
rcv_pipeline_in_flight(void)
{
	long		n = 0;

	for (int k = 0; k < pool.npipes; k++)
	{
		const rcv_pipeline *p = &pool.pipes[k];

		for (int i = 0; i < p->nunits; i++)
			n += p->units[(p->first + i) % UNITS_MAX].batch.n;
	}
	return n;
}

/* The oldest unit in flight on p, whose results come next (nunits > 0). */
static dbunit *
oldest(rcv_pipeline *p)
{
	return &p->units[p->first];
}

/* A new unit behind those in flight on p (nunits < UNITS_MAX). */
static dbunit *
unit_push(rcv_pipeline *p, unit_kind kind)
{
	dbunit	   *u = &p->units[(p->first + p->nunits) % UNITS_MAX];

	memset(u, 0, sizeof(*u));
	u->kind = kind;
	p->nunits++;
	if (kind == U_BATCH)
		p->nbatches++;
	return u;
}

/* Drop the oldest unit of p (its sync came back, or p was lost). */
static void
unit_pop(rcv_pipeline *p)
{
	if (oldest(p)->kind == U_BATCH)
		p->nbatches--;
	p->first = (p->first + 1) % UNITS_MAX;
	p->nunits--;
}

static void
update_db_up(void)
{
	rcv_metrics_set_db_up(rcv_pipeline_any_usable());
}

/*
 * conn_lost
 *		dbconn.c's hook once p's connection is gone: its batches in flight
 *		end as not committed (batch_done), and the next connection asks
 *		everything anew.  The kick lets the other connections take what
 *		waits, or batch.c answer it if none is usable.
 */
static void
conn_lost(void *arg)
{
	rcv_pipeline *p = arg;

	event_del(p->deadline_ev);
	p->setup_done = 0;
	p->want_rollback = 0;
	p->single = 0;				/* a reconnect asks again */
	p->want_probe = 0;
	p->want_prepare = 0;
	p->want_prepare_batch = 0;

	while (p->nunits > 0)
	{
		/* off the ring before batch.c is called, as in unit_done */
		dbunit		u = *oldest(p);

		unit_pop(p);
		if (u.kind == U_BATCH)
		{
			rcv_metrics_batch(u.batch.n, 0, 0);
			pool.hooks.batch_done(&u.batch, 0);
		}
	}
	update_db_up();
	rcv_pipeline_kick();
}

/* Drop p's connection (a send failed): its batches come back through batch_done. */
void
rcv_pipeline_fail(rcv_pipeline *p, const char *why)
{
	rcv_dbconn_fail(&p->db, why);
}

/*
 * rcv_pipeline_sent
 *		Close the newest unit on p, whose queries are queued: the sync is
 *		queued, the bytes flushed.  The deadline runs for the oldest unit; a
 *		unit behind others gets its own when its turn comes (unit_done).
 */
void
rcv_pipeline_sent(rcv_pipeline *p)
{
	dbunit	   *u = &p->units[(p->first + p->nunits - 1) % UNITS_MAX];

	if (!PQpipelineSync(p->db.conn))
	{
		rcv_dbconn_fail(&p->db, PQerrorMessage(p->db.conn));
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &u->sent_at);
	if (p->nunits == 1)
		event_add(p->deadline_ev, &pool.commit_timeout);
	rcv_dbconn_flush(&p->db);
}

/*
 * PREPARE the batch statement, alone before its sync: intake_batch(), or on
 * a single connection 0.1.0's intake(source, headers, body).
 */
static void
send_prepare(rcv_pipeline *p, int single)
{
	static const Oid batch_types[3] = {TEXTARRAYOID, TEXTARRAYOID, BYTEAARRAYOID};
	static const Oid single_types[3] = {TEXTOID, TEXTARRAYOID, BYTEAOID};
	dbunit	   *u = unit_push(p, U_PREPARE);
	int			ok;

	u->prepare_single = single;
	if (single)
		ok = PQsendPrepare(p->db.conn, RCV_STMT_SINGLE, "SELECT webhook_inbox.intake($1, $2, $3)",
						   3, single_types);
	else
		ok = PQsendPrepare(p->db.conn, RCV_STMT_BATCH,
						   "SELECT ord, outcome, reason FROM webhook_inbox.intake_batch($1, $2, $3)",
						   3, batch_types);
	if (!ok)
	{
		rcv_dbconn_fail(&p->db, PQerrorMessage(p->db.conn));
		return;
	}
	rcv_pipeline_sent(p);
}

/* A single connection asks again whether intake_batch() exists. */
static void
send_probe(rcv_pipeline *p)
{
	unit_push(p, U_PROBE);
	p->want_probe = 0;
	if (!PQsendQueryParams(p->db.conn, HAS_BATCH_QUERY, 0, NULL, NULL, NULL, NULL, 0))
	{
		rcv_dbconn_fail(&p->db, PQerrorMessage(p->db.conn));
		return;
	}
	rcv_pipeline_sent(p);
}

static void
send_setup_or_sources(rcv_pipeline *p)
{
	PGconn	   *conn = p->db.conn;
	int			setup = !p->setup_done;

	unit_push(p, setup ? U_SETUP : U_SOURCES);
	if (setup)
	{
		/*
		 * An acknowledgement promises durability: with synchronous_commit
		 * off, COMMIT returns before the WAL is flushed, so this session
		 * turns it back on (any stronger setting is left as it is).
		 */
		if (!PQsendQueryParams(conn,
							   "SELECT set_config('synchronous_commit', 'on', false)"
							   " WHERE current_setting('synchronous_commit') = 'off'",
							   0, NULL, NULL, NULL, NULL, 0) ||
			!PQsendQueryParams(conn, "LISTEN " NOTIFY_CHANNEL, 0, NULL, NULL,
							   NULL, NULL, 0) ||
			!PQsendQueryParams(conn, HAS_BATCH_QUERY, 0, NULL, NULL, NULL, NULL, 0))
			goto err;
	}
	if (!PQsendQueryParams(conn, rcv_sources_query, 0, NULL, NULL, NULL, NULL, 0))
		goto err;
	pool.want_sources = 0;
	rcv_pipeline_sent(p);
	return;
err:
	rcv_dbconn_fail(&p->db, PQerrorMessage(conn));
}

/*
 * A connection that can take one more batch: usable, no rollback to send
 * first, fewer than --db-pipeline batches in flight.
 */
static int
has_slot(const rcv_pipeline *p)
{
	return usable(p) && !p->want_rollback && p->nunits < UNITS_MAX &&
		p->nbatches < pool.cfg->db_pipeline;
}

/*
 * rcv_pipeline_free_slot
 *		The connection to take the next batch: of those that can take one
 *		more, the one with the fewest batches in flight, in turns among
 *		equals.  NULL when none can.
 */
rcv_pipeline *
rcv_pipeline_free_slot(void)
{
	rcv_pipeline *best = NULL;

	for (int k = 0; k < pool.npipes; k++)
	{
		rcv_pipeline *p = &pool.pipes[(pool.next_pipe + k) % pool.npipes];

		if (has_slot(p) && (best == NULL || p->nbatches < best->nbatches))
			best = p;
	}
	if (best != NULL)
		pool.next_pipe = (int) (best - pool.pipes + 1) % pool.npipes;
	return best;
}

/*
 * rcv_pipeline_batch_push
 *		A new batch unit on p (from rcv_pipeline_free_slot()), for batch.c
 *		to fill and send its statements on rcv_pipeline_pgconn(p), then
 *		close with rcv_pipeline_sent(), or hand back with
 *		rcv_pipeline_fail().  single says which statement p has prepared.
 */
rcv_dbbatch *
rcv_pipeline_batch_push(rcv_pipeline *p)
{
	dbunit	   *u = unit_push(p, U_BATCH);

	u->batch.single = p->single;
	return &u->batch;
}

PGconn *
rcv_pipeline_pgconn(rcv_pipeline *p)
{
	return p->db.conn;
}

/*
 * rcv_pipeline_kick
 *		Give the connections their own work: a pending rollback or the setup
 *		on an idle one, a sources load behind what is in flight (on one
 *		connection), the probe and prepare of a single one; then batch.c's
 *		kick gives them batches.
 */
void
rcv_pipeline_kick(void)
{
	for (int k = 0; k < pool.npipes; k++)
	{
		rcv_pipeline *p = &pool.pipes[k];

		if (p->db.state != RCV_DB_READY)
			continue;
		if (p->want_rollback)
		{
			if (p->nunits == 0)
			{
				unit_push(p, U_ROLLBACK);
				if (!PQsendQueryParams(p->db.conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0))
					rcv_dbconn_fail(&p->db, PQerrorMessage(p->db.conn));
				else
					rcv_pipeline_sent(p);
			}
			continue;
		}
		if (!p->setup_done)
		{
			/* after a failed setup, wait for the retry timer */
			if (p->nunits == 0 && p->want_prepare)
			{
				p->want_prepare = 0;
				send_prepare(p, p->single);
			}
			else if (p->nunits == 0 && !event_pending(pool.reload_ev, EV_TIMEOUT, NULL))
				send_setup_or_sources(p);
			continue;
		}
		if (pool.want_sources && p->nunits < UNITS_MAX &&
			!event_pending(pool.reload_ev, EV_TIMEOUT, NULL))
			send_setup_or_sources(p);
		if (p->db.state == RCV_DB_READY && p->single && p->want_prepare_batch &&
			p->nunits < UNITS_MAX)
		{
			p->want_prepare_batch = 0;
			send_prepare(p, 0);
		}
		if (p->db.state == RCV_DB_READY && p->single && p->want_probe && p->nunits < UNITS_MAX)
			send_probe(p);
	}
	pool.hooks.kick();
}

/*
 * Record one result of p's oldest unit.  An error at the sync itself (a
 * failed commit) comes as an error result before the sync, so it fails the
 * unit like any other.  A batch's other results are batch.c's to read.
 */
static void
handle_result(rcv_pipeline *p, PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);
	dbunit	   *u = oldest(p);

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
		rcv_dbconn_log_error(u->kind == U_BATCH ? "batch" :
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
	if (u->kind == U_BATCH)
	{
		if (pool.hooks.batch_result(&u->batch, res) < 0)
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
		rcv_log(pool.sources_loaded ? RCV_LOG_DEBUG : RCV_LOG_INFO,
				"loaded %d source%s", s->n, s->n == 1 ? "" : "s");
		rcv_metrics_sources_loaded(s->n);
		rcv_sources_install(s);
		pool.sources_loaded = 1;
		pool.sources_failing = 0;
	}
}

/*
 * The sync of p's oldest unit arrived: the unit is over, and the next one,
 * if any, gets its deadline.
 */
static void
unit_done(rcv_pipeline *p)
{
	dbunit		u = *oldest(p);
	PGTransactionStatusType xs;
	int			ok;

	unit_pop(p);
	if (p->nunits > 0)
		event_add(p->deadline_ev, &pool.commit_timeout);
	else
		event_del(p->deadline_ev);
	/*
	 * Nothing sent opens a transaction block; should one be left, close it.
	 * (With units behind this one, libpq says PQTRANS_ACTIVE.)
	 */
	xs = PQtransactionStatus(p->db.conn);
	if (xs == PQTRANS_INTRANS || xs == PQTRANS_INERROR)
		p->want_rollback = 1;
	switch (u.kind)
	{
		case U_BATCH:
			ok = !u.failed && u.batch.noutcomes == u.batch.n && !p->want_rollback;
			rcv_metrics_batch(u.batch.n, ok, rcv_metrics_since(&u.sent_at));
			rcv_log(RCV_LOG_DEBUG, "batch of %d %s on connection %d", u.batch.n,
					ok ? "committed" : "failed", p->db.no);
			pool.hooks.batch_done(&u.batch, ok);
			if (!ok && u.batch.single)
			{
				/* intake() refused a source we still list, or the update ran */
				pool.want_sources = 1;
				p->want_probe = p->single;
			}
			else if (!ok && u.undefined_function)
			{
				/*
				 * The function of the batch statement is gone (the extension
				 * was dropped, or is another release's): a new session asks
				 * again which one to use.
				 */
				rcv_dbconn_fail(&p->db, "the batch statement's function does not exist (SQLSTATE 42883): reconnecting");
				return;
			}
			break;
		case U_SETUP:
		case U_SOURCES:
			if (u.failed)
			{
				/*
				 * extension not installed yet, a permission missing, or
				 * secrets the database cannot read (its key file): the
				 * sources in use may be stale, and /readyz says so
				 */
				pool.want_sources = 1;
				pool.sources_failing = 1;
				if (!event_pending(pool.reload_ev, EV_TIMEOUT, NULL))
					event_add(pool.reload_ev, &reload_retry);
			}
			else if (u.kind == U_SETUP)
			{
				/* the batch statement next: intake_batch(), or 0.1.0's intake() */
				p->single = !u.has_batch;
				p->want_prepare = 1;
				if (p->single)
				{
					rcv_log(RCV_LOG_WARNING,
							"database connection %d: webhook_inbox.intake_batch() does not exist (the extension "
							"is at an earlier release: run ALTER EXTENSION webhook_inbox UPDATE); writing each "
							"delivery with intake(), one transaction per batch", p->db.no);
					if (!event_pending(pool.probe_ev, EV_TIMEOUT, NULL))
						event_add(pool.probe_ev, &probe_interval);
				}
			}
			break;
		case U_PREPARE:
			if (u.failed)
			{
				/* the setup again, after the reload delay */
				if (!p->setup_done)
				{
					p->want_prepare = 0;
					if (!event_pending(pool.reload_ev, EV_TIMEOUT, NULL))
						event_add(pool.reload_ev, &reload_retry);
				}
			}
			else if (!p->setup_done)
			{
				p->setup_done = 1;
				update_db_up();
				rcv_log(RCV_LOG_INFO, "database connection %d ready", p->db.no);
			}
			else if (!u.prepare_single && p->single)
			{
				p->single = 0;
				rcv_log(RCV_LOG_INFO, "database connection %d: webhook_inbox.intake_batch() exists now, "
						"batches use it again", p->db.no);
			}
			break;
		case U_ROLLBACK:
			p->want_rollback = 0;
			break;
		case U_PROBE:
			if (!u.failed && u.has_batch && p->single)
				p->want_prepare_batch = 1;
			break;
	}
}

/*
 * conn_readable
 *		dbconn.c's hook for input on p's connection: results of its units in
 *		flight, NOTIFYs, or the server going away.
 */
static void
conn_readable(evutil_socket_t fd, short what, void *arg)
{
	rcv_pipeline *p = arg;
	PGnotify   *n;
	int			nulls = 0;

	(void) fd;
	(void) what;
	if (!PQconsumeInput(p->db.conn))
	{
		rcv_dbconn_fail(&p->db, PQerrorMessage(p->db.conn));
		return;
	}
	while (p->db.conn && p->nunits > 0 && !PQisBusy(p->db.conn))
	{
		PGresult   *res = PQgetResult(p->db.conn);

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
			unit_done(p);
			continue;
		}
		handle_result(p, res);
		PQclear(res);
	}
	if (p->db.conn == NULL)
		return;
	while ((n = PQnotifies(p->db.conn)) != NULL)
	{
		if (strcmp(n->relname, NOTIFY_CHANNEL) == 0)
		{
			pool.want_sources = 1;
			for (int k = 0; k < pool.npipes; k++)
				pool.pipes[k].want_probe = pool.pipes[k].single;
		}
		PQfreemem(n);
	}
	if (PQstatus(p->db.conn) == CONNECTION_BAD)
	{
		rcv_dbconn_fail(&p->db, PQerrorMessage(p->db.conn));
		return;
	}
	rcv_pipeline_kick();
}

/* dbconn.c's hook once p's connection is in pipeline mode: the setup. */
static void
conn_ready(void *arg)
{
	(void) arg;
	/* a NOTIFY may have been missed while away: setup reloads the sources */
	event_del(pool.reload_ev);
	rcv_pipeline_kick();
}

/* The unit in flight took longer than allowed. */
static void
unit_deadline(evutil_socket_t fd, short what, void *arg)
{
	rcv_pipeline *p = arg;

	(void) fd;
	(void) what;
	rcv_dbconn_fail(&p->db, "no answer within commit-timeout");
}

/* Every probe_interval while any connection is single: probe them. */
static void
probe_due(evutil_socket_t fd, short what, void *arg)
{
	int			any = 0;

	(void) fd;
	(void) what;
	(void) arg;
	for (int k = 0; k < pool.npipes; k++)
		if (pool.pipes[k].single)
			pool.pipes[k].want_probe = any = 1;
	if (any)
		event_add(pool.probe_ev, &probe_interval);
	rcv_pipeline_kick();
}

static void
reload_due(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	(void) arg;
	rcv_pipeline_kick();
}

/*
 * rcv_pipeline_init
 *		Set up the connections' timers and start connecting; hooks are
 *		copied.  Returns 0 or -1 (rcv_pipeline_free() cleans up either way).
 */
int
rcv_pipeline_init(struct event_base *base, const rcv_config *cfg,
				  const rcv_pipeline_hooks *hooks)
{
	static const rcv_dbconn_hooks conn_hooks = {conn_readable, conn_ready, conn_lost};

	memset(&pool, 0, sizeof(pool));
	pool.cfg = cfg;
	pool.hooks = *hooks;
	pool.commit_timeout.tv_sec = cfg->commit_timeout_ms / 1000;
	pool.commit_timeout.tv_usec = (cfg->commit_timeout_ms % 1000) * 1000;
	pool.npipes = (int) cfg->db_connections;
	pool.pipes = calloc((size_t) pool.npipes, sizeof(rcv_pipeline));
	pool.reload_ev = evtimer_new(base, reload_due, NULL);
	pool.probe_ev = evtimer_new(base, probe_due, NULL);
	if (!pool.pipes || !pool.reload_ev || !pool.probe_ev)
		return -1;
	for (int i = 0; i < pool.npipes; i++)
	{
		rcv_pipeline *p = &pool.pipes[i];

		p->deadline_ev = evtimer_new(base, unit_deadline, p);
		if (!p->deadline_ev || rcv_dbconn_init(&p->db, i + 1, base, cfg, &conn_hooks, p) < 0)
			return -1;
	}
	return 0;
}

int
rcv_pipeline_sources_loaded(void)
{
	return pool.sources_loaded;
}

/* Whether the last load of the sources failed (it is retried meanwhile). */
int
rcv_pipeline_sources_failing(void)
{
	return pool.sources_failing;
}

/* Reload the sources as soon as a connection is idle (SIGHUP). */
void
rcv_pipeline_reload_sources(void)
{
	pool.want_sources = 1;
	event_del(pool.reload_ev);
	rcv_pipeline_kick();
}

/* Shutting down: a connection lost from now on stays down. */
void
rcv_pipeline_stop(void)
{
	for (int i = 0; i < pool.npipes; i++)
		rcv_dbconn_stop(&pool.pipes[i].db);
}

void
rcv_pipeline_free(void)
{
	for (int i = 0; pool.pipes && i < pool.npipes; i++)
	{
		rcv_dbconn_free(&pool.pipes[i].db);
		if (pool.pipes[i].deadline_ev)
			event_free(pool.pipes[i].deadline_ev);
	}
	free(pool.pipes);
	if (pool.reload_ev)
		event_free(pool.reload_ev);
	if (pool.probe_ev)
		event_free(pool.probe_ev);
	memset(&pool, 0, sizeof(pool));
}
