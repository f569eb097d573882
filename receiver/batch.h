/*
 * batch.h
 *		The database side of the receiver: group commit of deliveries over
 *		--db-connections libpq connections in pipeline mode (pipeline.c,
 *		dbconn.c), source loading and reconnection.
 */
#ifndef RCV_BATCH_H
#define RCV_BATCH_H

#include <stddef.h>
#include <time.h>

#include <event2/event.h>

#include "config.h"

/*
 * A verified delivery waiting for its transaction.  The HTTP side fills
 * source, headers (npairs name/value pairs as binary array elements, see
 * rcv_encode_header_elements(); malloc'd), body/len (borrowed from the
 * request, which outlives the delivery) and req; batch.c sets status and
 * outcome.
 */
typedef struct rcv_delivery
{
	struct rcv_delivery *next;
	void	   *req;			/* opaque to batch.c: the HTTP request */
	char	   *source;
	char	   *headers;
	size_t		headers_len;
	int			npairs;
	const unsigned char *body;
	size_t		len;
	int			status;			/* HTTP status of the answer */
	char		outcome[40];	/* new | duplicate | quarantined, or why refused */
	struct timespec queued_at;	/* set by rcv_batch_submit() */
} rcv_delivery;

/*
 * Called exactly once per submitted delivery: committed != 0 means its
 * transaction's COMMIT succeeded and status and outcome are set (200 and
 * the outcome word, or a 4xx and the reason code of a delivery refused on
 * its own, e.g. 400 event_id_too_long); 0 means it was not stored (answer
 * 503).  The callee owns d afterwards.
 */
typedef void (*rcv_complete_fn) (rcv_delivery *d, int committed);

/*
 * How many client connections are open (each may still send one request):
 * the HTTP side's count, which sizes a batch's share (see batch_share).
 */
typedef int (*rcv_connections_fn) (void);

extern int	rcv_batch_init(struct event_base *base, const rcv_config *cfg,
						   rcv_complete_fn complete,
						   rcv_connections_fn connections);
extern int	rcv_batch_submit(rcv_delivery *d);
extern int	rcv_batch_db_ready(void);
extern int	rcv_batch_sources_loaded(void);
extern int	rcv_batch_sources_failing(void);
extern void rcv_batch_reload_sources(void);
extern void rcv_batch_shutdown(void (*drained) (void));
extern void rcv_batch_free(void);

#endif							/* RCV_BATCH_H */
