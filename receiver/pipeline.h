/*
 * pipeline.h
 *		The receiver's database connections as batch.c uses them: a pool of
 *		connections in pipeline mode that carry batches as units of work,
 *		each ended by its own sync.  For batch.c only; the rest of the
 *		receiver goes through batch.h.
 *
 * The receiver's database files call one way: batch.c -> pipeline.c ->
 * dbconn.c.  pipeline.c reports back through the hooks batch.c registers
 * with rcv_pipeline_init().
 */
#ifndef RCV_PIPELINE_H
#define RCV_PIPELINE_H

#include <event2/event.h>
#include <libpq-fe.h>

#include "config.h"

/* Type OIDs of the batch statements' arguments. */
#define TEXTOID			25
#define BYTEAOID		17
#define TEXTARRAYOID	1009
#define BYTEAARRAYOID	1001

/*
 * The statements every ready connection has prepared, which batch.c
 * executes with binary parameters and text results:
 *	intake_batch(text[] sources, text[] headers, bytea[] bodies) returns a
 *		row (ord, outcome, reason) per delivery;
 *	intake(text source, text[] headers, bytea body), 0.1.0's, on a
 *		connection whose database has no intake_batch() yet ("single").
 */
#define RCV_STMT_BATCH	"intake_batch"
#define RCV_STMT_SINGLE "intake"

/* One connection of the pool with its units in flight; pipeline.c's alone. */
typedef struct rcv_pipeline rcv_pipeline;

/*
 * A batch in flight, as batch.c fills it.  pipeline.c carries it in its
 * unit until the unit's sync comes back or its connection is lost, reads
 * n, noutcomes and single, and never the deliveries.
 */
typedef struct rcv_dbbatch
{
	struct rcv_delivery *deliveries;	/* in order */
	int			n;
	int			noutcomes;		/* deliveries whose outcome is taken */
	int			single;			/* sent as one intake() per delivery */
	struct rcv_delivery *next_outcome;	/* single: whose intake() answers next */
} rcv_dbbatch;

/*
 * What pipeline.c tells batch.c.  batch_result gets each result of a
 * batch that is no error, in order (not its sync), and returns 0, or -1
 * when the result does not have the shape it needs: the batch fails.
 * batch_done is called exactly once per batch: committed != 0 only when
 * its sync came back with no error, every delivery has its outcome and no
 * transaction block was left open.  kick follows every change of the
 * connections (a unit over, a connection up or lost, a timer) once each
 * connection has its own work: batches may be due.
 */
typedef struct rcv_pipeline_hooks
{
	int			(*batch_result) (rcv_dbbatch *b, const PGresult *res);
	void		(*batch_done) (rcv_dbbatch *b, int committed);
	void		(*kick) (void);
} rcv_pipeline_hooks;

extern int	rcv_pipeline_init(struct event_base *base, const rcv_config *cfg,
							  const rcv_pipeline_hooks *hooks);
extern void rcv_pipeline_kick(void);
extern int	rcv_pipeline_any_usable(void);
extern int	rcv_pipeline_slots(void);
extern long rcv_pipeline_in_flight(void);
extern rcv_pipeline *rcv_pipeline_free_slot(void);
extern rcv_dbbatch *rcv_pipeline_batch_push(rcv_pipeline *p);
extern PGconn *rcv_pipeline_pgconn(rcv_pipeline *p);
extern void rcv_pipeline_sent(rcv_pipeline *p);
extern void rcv_pipeline_fail(rcv_pipeline *p, const char *why);
extern int	rcv_pipeline_sources_loaded(void);
extern int	rcv_pipeline_sources_failing(void);
extern void rcv_pipeline_reload_sources(void);
extern void rcv_pipeline_stop(void);
extern void rcv_pipeline_free(void);

#endif							/* RCV_PIPELINE_H */
