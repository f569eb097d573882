/*
 * metrics.h
 *		Counters and histograms, rendered in the Prometheus text format.
 */
#ifndef RCV_METRICS_H
#define RCV_METRICS_H

#include <stddef.h>
#include <time.h>

extern void rcv_metrics_request(const char *source, int status);
extern void rcv_metrics_verify_failure(const char *source, const char *reason);
extern void rcv_metrics_batch(int size, int ok, double commit_seconds);
extern void rcv_metrics_db_error(const char *sqlstate);
extern void rcv_metrics_refusal(const char *source, const char *code);
extern double rcv_metrics_since(const struct timespec *t0);
extern void rcv_metrics_delivery(double seconds);
extern void rcv_metrics_set_db_up(int up);
extern void rcv_metrics_reconnect(void);
extern void rcv_metrics_sources_loaded(int nsources);
extern void rcv_metrics_set_connections(int n);

/* Connections shed and requests refused before routing, to protect the others. */
extern void rcv_metrics_shed(const char *reason);
extern void rcv_metrics_refused_early(int status, const char *reason);
extern void rcv_metrics_set_buffered(long bytes);

extern char *rcv_metrics_render(size_t *len);
extern void rcv_metrics_reset(void);

#endif							/* RCV_METRICS_H */
