/*
 * dbconn.h
 *		One database connection's life, for pipeline.c: connecting without
 *		blocking, pipeline mode, flushing, losing it and reconnecting; and
 *		what the server says, in our log.
 *
 * The receiver's database files call one way: batch.c -> pipeline.c ->
 * dbconn.c.  Each tells the one above what happened through the hooks that
 * one registered, never by a call back up.
 */
#ifndef RCV_DBCONN_H
#define RCV_DBCONN_H

#include <event2/event.h>
#include <libpq-fe.h>

#include "config.h"

typedef enum rcv_dbstate
{
	RCV_DB_DOWN,				/* waiting for the reconnect timer */
	RCV_DB_CONNECTING,			/* PQconnectPoll in progress */
	RCV_DB_READY				/* in pipeline mode */
} rcv_dbstate;

/*
 * What a connection tells its owner, arg being the owner's pointer given to
 * rcv_dbconn_init().  readable is the socket's event callback while the
 * connection is ready: results, NOTIFYs, or the server going away.  ready
 * follows entering pipeline mode.  lost follows every rcv_dbconn_fail(),
 * once the connection is closed and its reconnect scheduled: whatever was
 * in flight on it is gone.
 */
typedef struct rcv_dbconn_hooks
{
	event_callback_fn readable;
	void		(*ready) (void *arg);
	void		(*lost) (void *arg);
} rcv_dbconn_hooks;

/* A connection.  Its owner reads no, conn and state, and writes none. */
typedef struct rcv_dbconn
{
	int			no;				/* for log lines */
	PGconn	   *conn;			/* NULL while down */
	rcv_dbstate state;
	struct event_base *base;
	const rcv_config *cfg;
	const rcv_dbconn_hooks *hooks;
	void	   *arg;
	struct event *sock_ev;		/* persistent read while READY; one-shot while connecting */
	struct event *write_ev;		/* while libpq has unsent data */
	struct event *retry_ev;		/* reconnect backoff */
	struct event *deadline_ev;	/* of the connect attempt */
	int			backoff_ms;
	int			ever_connected;
	int			stopping;		/* no more reconnecting */
} rcv_dbconn;

extern int	rcv_dbconn_init(rcv_dbconn *c, int no, struct event_base *base,
							const rcv_config *cfg, const rcv_dbconn_hooks *hooks,
							void *arg);
extern void rcv_dbconn_flush(rcv_dbconn *c);
extern void rcv_dbconn_fail(rcv_dbconn *c, const char *why);
extern void rcv_dbconn_stop(rcv_dbconn *c);
extern void rcv_dbconn_free(rcv_dbconn *c);
extern void rcv_dbconn_log_error(const char *what, const PGresult *res);

#endif							/* RCV_DBCONN_H */
