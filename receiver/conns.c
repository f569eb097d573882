/*
 * conns.c
 *		What the clients may hold of the receiver: the count of connections
 *		of each client address (for --max-connections-per-address) and the
 *		bytes of requests received and not yet answered (for
 *		--max-buffered).  http.c decides what to do when either is over its
 *		limit; this file only keeps the numbers.
 *
 * Addresses live in a small hash table of entries freed when their last
 * connection closes, so its size follows the open connections, never the
 * number of clients ever seen.  An IPv6 client is counted by its /64: one
 * host is routinely given a whole /64, and counting single addresses
 * would let it open a cap's worth of connections from each of them.
 */
#include "conns.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#define ADDR_BUCKETS 1024

typedef struct addr_entry
{
	struct addr_entry *next;
	rcv_addr	addr;
	long		count;
} addr_entry;

static addr_entry *table[ADDR_BUCKETS];
static long buffered;

void
rcv_addr_of_fd(int fd, rcv_addr *out)
{
	struct sockaddr_storage ss;
	socklen_t	len = sizeof(ss);

	memset(out, 0, sizeof(*out));
	if (fd < 0 || getpeername(fd, (struct sockaddr *) &ss, &len) != 0)
		return;
	if (ss.ss_family == AF_INET)
	{
		memcpy(out->b, &((struct sockaddr_in *) &ss)->sin_addr, 4);
		out->len = 4;
	}
	else if (ss.ss_family == AF_INET6)
	{
		const unsigned char *a = ((struct sockaddr_in6 *) &ss)->sin6_addr.s6_addr;
		static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

		/* an IPv4 client on a dual-stack socket is that IPv4 address */
		if (memcmp(a, mapped, 12) == 0)
		{
			memcpy(out->b, a + 12, 4);
			out->len = 4;
		}
		else
		{
			memcpy(out->b, a, 8);
			out->len = 8;
		}
	}
}

static unsigned int
addr_bucket(const rcv_addr *a)
{
	uint32_t	h = 2166136261u;	/* FNV-1a */

	for (int i = 0; i < a->len; i++)
		h = (h ^ a->b[i]) * 16777619u;
	return h % ADDR_BUCKETS;
}

/*
 * rcv_addr_acquire
 *		Count one more connection of a; the caller releases it when the
 *		connection closes, whatever it decides about it.  Out of memory, a
 *		connection goes uncounted (0) rather than refused.
 */
long
rcv_addr_acquire(const rcv_addr *a)
{
	addr_entry **head;
	addr_entry *e;

	if (a->len == 0)
		return 0;
	head = &table[addr_bucket(a)];
	for (e = *head; e; e = e->next)
		if (e->addr.len == a->len && memcmp(e->addr.b, a->b, (size_t) a->len) == 0)
			return ++e->count;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return 0;
	e->addr = *a;
	e->count = 1;
	e->next = *head;
	*head = e;
	return 1;
}

void
rcv_addr_release(const rcv_addr *a)
{
	addr_entry **pp;

	if (a->len == 0)
		return;
	for (pp = &table[addr_bucket(a)]; *pp; pp = &(*pp)->next)
	{
		addr_entry *e = *pp;

		if (e->addr.len == a->len && memcmp(e->addr.b, a->b, (size_t) a->len) == 0)
		{
			if (--e->count <= 0)
			{
				*pp = e->next;
				free(e);
			}
			return;
		}
	}
}

void
rcv_buffered_add(long delta)
{
	buffered += delta;
}

long
rcv_buffered(void)
{
	return buffered;
}
