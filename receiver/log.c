/*
 * log.c
 *		Logging for the receiver: a timestamp, a level and a message on one
 *		line of stderr.  Levels are checked before formatting (redis style),
 *		so debug lines cost nothing when disabled.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

rcv_log_level rcv_log_min_level = RCV_LOG_INFO;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

/*
 * rcv_log_parse_level
 *		Level by name ("warn" is accepted for "warning"); -1 if unknown.
 */
int
rcv_log_parse_level(const char *s, rcv_log_level *out)
{
	for (int i = 0; i < 4; i++)
		if (strcasecmp(s, level_names[i]) == 0)
		{
			*out = (rcv_log_level) i;
			return 0;
		}
	if (strcasecmp(s, "warn") == 0)
	{
		*out = RCV_LOG_WARNING;
		return 0;
	}
	return -1;
}

void
rcv_log(rcv_log_level level, const char *fmt,...)
{
	char		line[1024];
	char		stamp[32];
	struct timeval tv;
	struct tm	tm;
	va_list		ap;

	if (!rcv_log_enabled(level))
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one write per line, so concurrent writers do not interleave */
	fprintf(stderr, "%s.%03dZ webhook-receiver %s: %s\n", stamp,
			(int) (tv.tv_usec / 1000), level_names[level], line);
}

/*
 * rcv_log_safe
 *		Copy s into buf keeping only characters a source name may have;
 *		anything else becomes '?', and the copy is truncated to fit.
 *
 * Returns buf.  Used for names taken from request paths, which an attacker
 * controls, so a log line cannot be forged or made unreadable.
 */
const char *
rcv_log_safe(const char *s, char *buf, size_t bufsize)
{
	size_t		n = 0;

	if (bufsize == 0)
		return "";
	for (; s && *s && n + 1 < bufsize; s++)
	{
		unsigned char c = (unsigned char) *s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')
			buf[n++] = (char) c;
		else
			buf[n++] = '?';
	}
	buf[n] = '\0';
	return buf;
}
