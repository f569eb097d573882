/*
 * deliver.h
 *		Signed webhook delivery over HTTP with a fixed connection pool,
 *		per-message delays (the reorder knob) and retries of non-2xx answers
 *		on an exponential, capped backoff.
 *
 * Used by serve (chaotic delivery of the live scenario) and replay (one
 * attempt per recorded event).  Everything runs on the caller's event base;
 * nothing blocks.
 */
#ifndef SIM_DELIVER_H
#define SIM_DELIVER_H

#include <stddef.h>

#include <event2/event.h>

#include "sign.h"

typedef struct dlv_policy
{
	int			max_attempts;	/* >= 1; 1 means never retry */
	int			retry_base_ms;	/* first retry delay; doubles each time */
	int			retry_max_ms;	/* cap of the delay */
	int			timeout_s;		/* per attempt */
} dlv_policy;

typedef struct dlv_stats
{
	long		submitted;		/* messages handed to the engine */
	long		first_sent;		/* messages sent at least once */
	long		attempts;		/* HTTP attempts, retries included */
	long		acked;			/* messages answered 2xx */
	long		non2xx;			/* attempts answered with a non-2xx status */
	long		conn_errors;	/* attempts without an HTTP answer */
	long		failed;			/* messages that used up max_attempts */
} dlv_stats;

typedef struct dlv_engine dlv_engine;

/* Final outcome of one message: its tag, last HTTP status (0: none), acked. */
typedef void (*dlv_done_fn) (void *arg, long tag, int status, int acked);

/*
 * Create an engine delivering to base_url (http://host:port[/prefix]); each
 * message goes to <prefix>/hooks/<source name>.  Returns NULL with a reason
 * in err for a bad URL.
 */
extern dlv_engine *dlv_new(struct event_base *base, const char *base_url,
						   int concurrency, const dlv_policy *policy,
						   char *err, size_t errlen);
extern void dlv_set_done(dlv_engine *e, dlv_done_fn fn, void *arg);

/*
 * Queue one message for delivery after delay_ms.  headers and body are
 * copied; src must outlive the engine.  Signature headers are added at each
 * attempt with the current time.
 */
extern void dlv_submit(dlv_engine *e, const sim_source *src, long tag,
					   const hdr_list *headers, const char *body, size_t len,
					   int delay_ms);

/* No message waiting, queued or in flight. */
extern int	dlv_idle(const dlv_engine *e);
extern const dlv_stats *dlv_get_stats(const dlv_engine *e);
extern void dlv_free(dlv_engine *e);

#endif							/* SIM_DELIVER_H */
