/*
 * http.h
 *		The HTTP side: routes, limits, connection tracking, replies.
 */
#ifndef RCV_HTTP_H
#define RCV_HTTP_H

#include <event2/event.h>
#include <openssl/ssl.h>

#include "batch.h"
#include "config.h"

extern int	rcv_http_start(struct event_base *base, const rcv_config *cfg,
						   SSL_CTX *tls);
extern void rcv_http_complete(rcv_delivery *d, int committed);
extern void rcv_http_shutdown(void (*closed) (void));
extern int	rcv_http_connections(void);
extern int	rcv_http_port(int admin);
extern void rcv_http_free(void);

#endif							/* RCV_HTTP_H */
