/*
 * metrics.c
 *		What /metrics shows: requests by source and status, verification
 *		failures by source and reason, the group-commit batch size and commit
 *		latency histograms, and gauges for the database and sources.
 *
 * Labelled counters live in short lists.  Label values are bounded: the
 * source label is a configured source name or "" (unknown sources are never
 * used as label values, or a scanner could grow the list without limit).
 */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct labelled
{
	struct labelled *next;
	char	   *a;				/* source */
	char	   *b;				/* status or reason */
	unsigned long long count;
} labelled;

typedef struct histogram
{
	const double *bounds;
	int			nbounds;
	unsigned long long buckets[16];	/* cumulative at render time */
	unsigned long long count;
	double		sum;
} histogram;

static const double batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
static const double commit_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
0.1, 0.25, 0.5, 1, 2.5, 5};

static labelled *requests;
static labelled *failures;
static labelled *db_errors;		/* a: SQLSTATE, b: "" */
static labelled *refusals;		/* a: source, b: intake's refusal code */
static histogram batch_hist = {batch_bounds, 11, {0}, 0, 0};
static histogram commit_hist = {commit_bounds, 12, {0}, 0, 0};
static histogram delivery_hist = {commit_bounds, 12, {0}, 0, 0};
static unsigned long long batches_ok;
static unsigned long long batches_failed;
static unsigned long long reconnects;
static unsigned long long reloads;
static int	db_up;
static int	sources_count = -1;
static int	connections;

/* Find or add the (a, b) counter in *list and bump it. */
static void
bump(labelled **list, const char *a, const char *b)
{
	labelled   *l;

	for (l = *list; l; l = l->next)
		if (strcmp(l->a, a) == 0 && strcmp(l->b, b) == 0)
		{
			l->count++;
			return;
		}
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return;
	l->a = strdup(a);
	l->b = strdup(b);
	if (l->a == NULL || l->b == NULL)
	{
		free(l->a);
		free(l->b);
		free(l);
		return;
	}
	l->count = 1;
	l->next = *list;
	*list = l;
}

static void
observe(histogram *h, double v)
{
	for (int i = 0; i < h->nbounds; i++)
		if (v <= h->bounds[i])
		{
			h->buckets[i]++;
			break;
		}
	h->count++;
	h->sum += v;
}

/*
 * Seconds since t0 on CLOCK_MONOTONIC: what the latency histograms take
 * (a delivery's time since it was queued, a batch's since it was sent).
 */
double
rcv_metrics_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double) (now.tv_sec - t0->tv_sec) +
		(double) (now.tv_nsec - t0->tv_nsec) / 1e9;
}

void
rcv_metrics_delivery(double seconds)
{
	observe(&delivery_hist, seconds);
}

void
rcv_metrics_request(const char *source, int status)
{
	char		s[8];

	snprintf(s, sizeof(s), "%d", status);
	bump(&requests, source ? source : "", s);
}

void
rcv_metrics_verify_failure(const char *source, const char *reason)
{
	bump(&failures, source, reason);
}

/* A statement or commit the database refused, by its SQLSTATE (53100: the disk is full). */
void
rcv_metrics_db_error(const char *sqlstate)
{
	bump(&db_errors, sqlstate && *sqlstate ? sqlstate : "?", "");
}

/*
 * A delivery intake refused on its own account (400 tenant_mismatch, say),
 * by source and refusal code.  Codes are intake's fixed list; anything else
 * counts as "refused" so that no value from a request can grow the list.
 */
void
rcv_metrics_refusal(const char *source, const char *code)
{
	size_t		n = code ? strlen(code) : 0;

	if (n == 0 || n > 40 || strspn(code, "abcdefghijklmnopqrstuvwxyz_") != n)
		code = "refused";
	bump(&refusals, source ? source : "", code);
}

void
rcv_metrics_batch(int size, int ok, double commit_seconds)
{
	observe(&batch_hist, size);
	if (ok)
	{
		batches_ok++;
		observe(&commit_hist, commit_seconds);
	}
	else
		batches_failed++;
}

void
rcv_metrics_set_db_up(int up)
{
	db_up = up;
}

void
rcv_metrics_reconnect(void)
{
	reconnects++;
}

void
rcv_metrics_sources_loaded(int n)
{
	reloads++;
	sources_count = n;
}

void
rcv_metrics_set_connections(int n)
{
	connections = n;
}

/* ---------------------------------------------------------------------
 * Protection of the clients from each other: connections the receiver
 * shed (reason: slots_full, address_cap, deadline) and requests it refused
 * before they reached a route (status and reason: 503 buffer_budget, 400
 * nul_byte_in_header, 400 control_byte_in_header), and the bytes of
 * unanswered requests it holds.
 * --------------------------------------------------------------------- */

static labelled *sheds;			/* a: reason, b: "" */
static labelled *early_refusals;	/* a: status, b: reason */
static long buffered_bytes;

void
rcv_metrics_shed(const char *reason)
{
	bump(&sheds, reason, "");
}

/* Also one request answered, of no source (it never reached a route). */
void
rcv_metrics_refused_early(int status, const char *reason)
{
	char		s[8];

	snprintf(s, sizeof(s), "%d", status);
	bump(&early_refusals, s, reason);
	rcv_metrics_request("", status);
}

void
rcv_metrics_set_buffered(long bytes)
{
	buffered_bytes = bytes;
}

static void
render_protection(FILE *f)
{
	fputs("# HELP webhook_receiver_connections_shed_total Connections the receiver closed to keep serving others, by reason.\n"
		  "# TYPE webhook_receiver_connections_shed_total counter\n", f);
	for (labelled *l = sheds; l; l = l->next)
		fprintf(f, "webhook_receiver_connections_shed_total{reason=\"%s\"} %llu\n", l->a, l->count);
	fputs("# HELP webhook_receiver_early_refusals_total Requests refused before routing (memory budget, bytes no header may hold), by status and reason.\n"
		  "# TYPE webhook_receiver_early_refusals_total counter\n", f);
	for (labelled *l = early_refusals; l; l = l->next)
		fprintf(f, "webhook_receiver_early_refusals_total{status=\"%s\",reason=\"%s\"} %llu\n",
				l->a, l->b, l->count);
	fprintf(f, "# HELP webhook_receiver_buffered_bytes Bytes of requests received and not yet answered (limit: --max-buffered).\n"
			"# TYPE webhook_receiver_buffered_bytes gauge\nwebhook_receiver_buffered_bytes %ld\n",
			buffered_bytes);
}

/* Label values are source names, digits and reason words; escape anyway. */
static void
put_label(FILE *f, const char *s)
{
	for (; *s; s++)
	{
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void
render_hist(FILE *f, const char *name, const char *help, histogram *h)
{
	unsigned long long cum = 0;

	fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (int i = 0; i < h->nbounds; i++)
	{
		cum += h->buckets[i];
		fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], cum);
	}
	fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, h->count);
	fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, h->count);
}

/*
 * rcv_metrics_render
 *		The whole exposition as a malloc'd string (caller frees), or NULL.
 */
char *
rcv_metrics_render(size_t *len)
{
	char	   *out = NULL;
	FILE	   *f = open_memstream(&out, len);

	if (f == NULL)
		return NULL;
	fputs("# HELP webhook_receiver_requests_total Requests answered, by source and HTTP status.\n"
		  "# TYPE webhook_receiver_requests_total counter\n", f);
	for (labelled *l = requests; l; l = l->next)
	{
		fputs("webhook_receiver_requests_total{source=\"", f);
		put_label(f, l->a);
		fprintf(f, "\",status=\"%s\"} %llu\n", l->b, l->count);
	}
	fputs("# HELP webhook_receiver_verification_failures_total Deliveries refused by signature verification, by source and reason.\n"
		  "# TYPE webhook_receiver_verification_failures_total counter\n", f);
	for (labelled *l = failures; l; l = l->next)
	{
		fputs("webhook_receiver_verification_failures_total{source=\"", f);
		put_label(f, l->a);
		fprintf(f, "\",reason=\"%s\"} %llu\n", l->b, l->count);
	}
	fputs("# HELP webhook_receiver_refusals_total Verified deliveries the database refused on their own account (nothing stored), by source and reason.\n"
		  "# TYPE webhook_receiver_refusals_total counter\n", f);
	for (labelled *l = refusals; l; l = l->next)
	{
		fputs("webhook_receiver_refusals_total{source=\"", f);
		put_label(f, l->a);
		fprintf(f, "\",reason=\"%s\"} %llu\n", l->b, l->count);
	}
	fputs("# HELP webhook_receiver_db_errors_total Statements and commits the database refused, by SQLSTATE (53100: its disk is full).\n"
		  "# TYPE webhook_receiver_db_errors_total counter\n", f);
	for (labelled *l = db_errors; l; l = l->next)
	{
		fputs("webhook_receiver_db_errors_total{sqlstate=\"", f);
		put_label(f, l->a);
		fprintf(f, "\"} %llu\n", l->count);
	}
	render_hist(f, "webhook_receiver_batch_size", "Deliveries per group-commit transaction.",
				&batch_hist);
	render_hist(f, "webhook_receiver_commit_seconds",
				"Time from sending a batch to its COMMIT being confirmed.", &commit_hist);
	render_hist(f, "webhook_receiver_delivery_seconds",
				"Time from a verified delivery joining the queue to its answer, for every delivery answered after its batch.",
				&delivery_hist);
	fprintf(f, "# HELP webhook_receiver_batches_total Group-commit transactions, by result.\n"
			"# TYPE webhook_receiver_batches_total counter\n"
			"webhook_receiver_batches_total{result=\"committed\"} %llu\n"
			"webhook_receiver_batches_total{result=\"failed\"} %llu\n",
			batches_ok, batches_failed);
	fprintf(f, "# HELP webhook_receiver_db_up Whether the database connection is ready (1) or not (0).\n"
			"# TYPE webhook_receiver_db_up gauge\nwebhook_receiver_db_up %d\n", db_up);
	fprintf(f, "# HELP webhook_receiver_db_reconnects_total Connection attempts after the first.\n"
			"# TYPE webhook_receiver_db_reconnects_total counter\nwebhook_receiver_db_reconnects_total %llu\n",
			reconnects);
	fprintf(f, "# HELP webhook_receiver_sources Enabled sources currently loaded (-1 before the first load).\n"
			"# TYPE webhook_receiver_sources gauge\nwebhook_receiver_sources %d\n", sources_count);
	fprintf(f, "# HELP webhook_receiver_source_reloads_total Successful loads of the sources.\n"
			"# TYPE webhook_receiver_source_reloads_total counter\nwebhook_receiver_source_reloads_total %llu\n",
			reloads);
	fprintf(f, "# HELP webhook_receiver_connections Open client connections.\n"
			"# TYPE webhook_receiver_connections gauge\nwebhook_receiver_connections %d\n",
			connections);
	render_protection(f);
	if (fclose(f) != 0)
	{
		free(out);
		return NULL;
	}
	return out;
}

/* Free every labelled counter (at exit, so leak checkers stay quiet). */
void
rcv_metrics_reset(void)
{
	labelled  **lists[] = {&requests, &failures, &db_errors, &refusals, &sheds, &early_refusals};

	for (int i = 0; i < (int) (sizeof(lists) / sizeof(lists[0])); i++)
	{
		labelled   *l = *lists[i];

		while (l)
		{
			labelled   *next = l->next;

			free(l->a);
			free(l->b);
			free(l);
			l = next;
		}
		*lists[i] = NULL;
	}
}
