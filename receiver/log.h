/*
 * log.h
 *		Level-checked logging to stderr, one line per event.
 *
 * Callers pass only names, numbers and reasons: never a body, a header value
 * or a secret.  rcv_log_safe() makes an untrusted name (a URL path segment)
 * printable before it goes into a line.
 */
#ifndef RCV_LOG_H
#define RCV_LOG_H

#include <stddef.h>

typedef enum rcv_log_level
{
	RCV_LOG_ERROR = 0,
	RCV_LOG_WARNING,
	RCV_LOG_INFO,
	RCV_LOG_DEBUG
} rcv_log_level;

extern rcv_log_level rcv_log_min_level;

extern int	rcv_log_parse_level(const char *s, rcv_log_level *out);
extern void rcv_log(rcv_log_level level, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));
extern const char *rcv_log_safe(const char *s, char *buf, size_t bufsize);

#define rcv_log_enabled(level) ((level) <= rcv_log_min_level)

#endif							/* RCV_LOG_H */
