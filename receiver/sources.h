/*
 * sources.h
 *		The configured sources, as loaded from webhook_inbox.receiver_sources().
 */
#ifndef RCV_SOURCES_H
#define RCV_SOURCES_H

#include <libpq-fe.h>

#include "verify.h"

typedef struct rcv_source
{
	char	   *name;
	char	   *kind;
	rcv_verifier verifier;
	const char *problem;		/* set when the source cannot verify: 503 */
} rcv_source;

typedef struct rcv_sources
{
	int			n;
	rcv_source *items;			/* sorted by name (strcmp) */
} rcv_sources;

/* The query whose result rcv_sources_from_result() reads. */
extern const char *const rcv_sources_query;

extern rcv_sources *rcv_sources_from_result(const PGresult *res);
extern const rcv_source *rcv_sources_find(const rcv_sources *s, const char *name);
extern void rcv_sources_free(rcv_sources *s);

/* The snapshot in use; replaced whole on reload. */
extern void rcv_sources_install(rcv_sources *s);
extern const rcv_sources *rcv_sources_current(void);

#endif							/* RCV_SOURCES_H */
