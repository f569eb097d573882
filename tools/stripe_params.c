/*
 * stripe_params.c
 *		Stripe's parameter checks, shared by stripe_api.c (lists, retrieve,
 *		Connect) and stripe_refunds.c: names against the SDK's *Params
 *		interfaces, integers, timestamps and Stripe's invalid_request_error
 *		answers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "api_int.h"
#include "stripe_int.h"

static const char *const range_params = " created current_period_end current_period_start due_date ";
static const char *const array_params = " expand types ";

/* Is w[0..n) one of the space-separated words? */
int
word_in(const char *words, const char *w, size_t n)
{
	const char *p = words;

	while (*p)
	{
		const char *s;

		while (*p == ' ')
			p++;
		s = p;
		while (*p && *p != ' ')
			p++;
		if ((size_t) (p - s) == n && n > 0 && strncmp(s, w, n) == 0)
			return 1;
	}
	return 0;
}

void
stripe_msg(struct evhttp_request *req, int code, const char *errcode, const char *param,
		   const char *fmt, const char *arg)
{
	char		msg[512];

	snprintf(msg, sizeof(msg), fmt, arg);
	api_stripe_error(req, code, "invalid_request_error", errcode, param, msg);
}

/*
 * Check every parameter's name against the accepted set: the base name must
 * be in sdk (or pagination when paged), a subscript only where the SDK's type
 * has one (RangeQueryParam, arrays, metadata).  Answers the error and returns
 * -1 on the first bad one.
 */
int
check_names(struct evhttp_request *req, sim_params *ps, const char *sdk,
			const char *implemented, int paged)
{
	int			i;

	for (i = 0; i < ps->n; i++)
	{
		const char *name = ps->p[i].name;
		const char *br = strchr(name, '[');
		size_t		n = br ? (size_t) (br - name) : strlen(name);
		char		spaced[80];
		int			ok = word_in(sdk, name, n) ||
			(paged && (word_in("limit starting_after ending_before", name, n)));

		snprintf(spaced, sizeof(spaced), " %.*s ", (int) (n < 60 ? n : 60), name);
		if (ok && br)
		{
			const char *sub = br + 1;
			const char *close = strchr(sub, ']');

			ok = close != NULL && close[1] == '\0';
			if (ok && strstr(range_params, spaced))
				ok = word_in("gt gte lt lte", sub, (size_t) (close - sub));
			else if (ok && strstr(array_params, spaced))
				ok = strspn(sub, "0123456789") == (size_t) (close - sub);
			else if (ok)
				ok = strncmp(name, "metadata", n) == 0 && n == 8 && close > sub;
		}
		if (!ok)
		{
			stripe_msg(req, 400, "parameter_unknown", name, "Received unknown parameter: %s", name);
			return -1;
		}
		if (!word_in(implemented, name, n) &&
			!word_in("limit starting_after ending_before", name, n))
		{
			stripe_msg(req, 400, "parameter_unsupported", name,
					   "webhook-sim does not model the parameter %s (Stripe accepts it)", name);
			return -1;
		}
	}
	return 0;
}

int
parse_ts(struct evhttp_request *req, const char *name, const char *v, int64_t *out)
{
	if (parse_int64(v, 0, INT64_MAX / 4, out) != 0)
	{
		stripe_msg(req, 400, "parameter_invalid_integer", name,
				   "Invalid integer: %s", v);
		return -1;
	}
	return 0;
}

int
one_of(const char *v, const char *words)
{
	return word_in(words, v, strlen(v));
}
