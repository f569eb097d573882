/*
 * fetch.h
 *		One provider request sent on its own and waited for (fetch.c), for
 *		the effects: the many requests of a round go through wi_http_run()
 *		(provider.h).
 */
#ifndef WI_FETCH_H
#define WI_FETCH_H

#include "postgres.h"

#include "lib/stringinfo.h"

/* Sets libcurl up for this process, once; raises if it cannot. */
extern void wi_http_ensure(void);

/*
 * Sends method url with headers (NULL-terminated "Name: value" lines) and
 * body (or NULL), after the origin check of wi_http_refusal(), on a
 * connection of its own, and waits for the answer.  Never raises: returns
 * "ok" (*status set), "refused" (the origin check said no), "not_sent"
 * (provably never reached the provider) or "unknown" (it may have), with
 * *error set but for "ok".  At most max_response bytes of the answer are
 * kept in response; the rest is read and dropped.
 */
extern const char *wi_http_send(const char *method, const char *url, const char *origin,
								const char *const *headers, const char *body,
								StringInfo response, int max_response,
								long *status, char **error);

#endif							/* WI_FETCH_H */
