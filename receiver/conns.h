/*
 * conns.h
 *		What the clients may hold of the receiver: connections per client
 *		address, and bytes of unanswered requests for all of them.
 */
#ifndef RCV_CONNS_H
#define RCV_CONNS_H

#include <stddef.h>

/* A client address as counted: IPv4 whole, IPv6 by its /64. */
typedef struct rcv_addr
{
	unsigned char b[16];
	int			len;			/* 0: unknown (not a TCP peer) */
} rcv_addr;

/* The peer of socket fd, as counted; len 0 when it has none. */
extern void rcv_addr_of_fd(int fd, rcv_addr *out);

/* One more connection from a; returns how many it now has (0 when a is unknown). */
extern long rcv_addr_acquire(const rcv_addr *a);

/* That connection closed. */
extern void rcv_addr_release(const rcv_addr *a);

/* Bytes of requests received and not yet answered, all connections. */
extern void rcv_buffered_add(long delta);
extern long rcv_buffered(void);

#endif							/* RCV_CONNS_H */
