/*
 * serve.c
 *		`webhook-sim serve`: generate the scenario, serve the provider API and
 *		deliver every event to the receiver with chaos.
 *
 * With --deliver-to, changes are applied progressively (at --rate events per
 * second, or as fast as the loop allows) and each event is dropped,
 * delayed (reorder) and/or duplicated by draws from a chaos PRNG that is
 * separate from the scenario PRNG, so chaos flags never change the recorded
 * stream.  Without --deliver-to, every change is applied before the API
 * starts listening (the truth is the final state) and the stream is only
 * recorded.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "api.h"
#include "commands.h"
#include "deliver.h"
#include "model.h"

#define CMD "serve"
#define GEN_BATCH 500

typedef struct serve_opts
{
	char		host[128];
	int			port;
	uint64_t	seed;
	long		objects;
	long		events;
	const char *deliver_to;
	const char *record;
	double		duplicate;
	int			reorder_ms;
	double		drop;
	int			concurrency;
	double		rate;
	double		thin_share;
	int			connect_accounts;	/* Stripe Connect: accounts owning the objects */
	int			shopify_shops;	/* a Shopify app: shops owning the orders */
	long		shopify_old_orders; /* orders created 61-400 days before the epoch */
	unsigned	types;
	const char *repo;			/* GitHub owner/name */
	int64_t		epoch;			/* INT64_MIN: now */
	dlv_policy	policy;
	api_options api;
	fault_rule	faults[8];
	int			nfaults;
	double		fault_429;
	double		fault_5xx;
	int			retry_after;
} serve_opts;

typedef struct serve_ctx
{
	serve_opts *opt;
	sim_source	sources[WI_NUM_SOURCE_KINDS];
	int			nsources;
	sim_model	model;
	struct event_base *base;
	sim_api    *api;
	dlv_engine *dlv;
	FILE	   *record;
	int			record_failed;
	sim_rng		chaos;
	long		generated;
	long		dropped;
	id_map		dropped_by;		/* event type -> dropped deliveries */
	id_map		dropped_accounts;	/* Connect: account -> dropped deliveries */
	long		duplicated;
	int			gen_done;
	int			reported;
	double		start;
	struct event *gen_ev;
	struct event *check_ev;
} serve_ctx;

static void
serve_help(void)
{
	puts("Usage: webhook-sim serve --listen HOST:PORT [options]\n"
		 "\n"
		 "Scenario:\n"
		 "  --seed N                 scenario seed (default 1)\n"
		 "  --objects N              objects to create (default 100)\n"
		 "  --events N               events to generate (default 1000)\n"
		 "  --stripe NAME:SECRET     Stripe-kind source: the Stripe types of --types\n"
		 "  --shopify NAME:SECRET    Shopify-kind source: orders\n"
		 "  --github NAME:SECRET     GitHub-kind source: issues and pull requests\n"
		 "  --github-repo OWNER/NAME the repository of the GitHub API (default acme/widgets);\n"
		 "                           several comma-separated spread the objects over them\n"
		 "  --github-app ID[:CLIENT_ID]  the API is a GitHub App's: reads need an installation\n"
		 "                           token, minted with a JWT (RS256) whose iss is ID or CLIENT_ID\n"
		 "  --github-app-key FILE    the app's public key (or private key) in PEM\n"
		 "  --github-installation ID[:OWNER/REPO[,...]]\n"
		 "                           an installation of the app and its repositories (default\n"
		 "                           --github-repo); repeat for several\n"
		 "  --github-token-ttl SECS  lifetime of installation tokens (default 3600)\n"
		 "  --github-rate-limit N[/SECS] requests per installation token's installation per\n"
		 "                           window (default none; window 3600 s), then 403 with\n"
		 "                           x-ratelimit-remaining: 0 until x-ratelimit-reset\n"
		 "  --types LIST             object types to generate (default\n"
		 "                           subscription,payment_intent,refund,dispute,order,issue,\n"
		 "                           pull_request); also invoice, customer, checkout.session, charge\n"
		 "  --epoch now|SECONDS      start of the scenario's clock (default now)\n"
		 "  --standard NAME:SECRET   Standard Webhooks source: takes the subscription events\n"
		 "  --thin-share P           share of Stripe subscription events sent as thin events (default 0)\n"
		 "  --connect-accounts N     Stripe Connect: N connected accounts own the Stripe objects, each\n"
		 "                           readable only under its Stripe-Account (default 0: the platform's)\n"
		 "  --shopify-shops N        a Shopify app: N shops own the orders, each read only at\n"
		 "                           /shops/{shop}/admin/ with its own expiring token (GET /_sim/shopify/shops)\n"
		 "  --shopify-token-ttl S    seconds a shop's access token lasts (default 3600)\n"
		 "  --shopify-client-id ID   the app's client id its token refreshes send (client_secret: its secret)\n"
		 "  --shopify-old-orders N   the first N orders were created 61 to 400 days before the epoch\n"
		 "  --shopify-scopes LIST    the app's access scopes (default read_orders: orders older than\n"
		 "                           60 days are hidden, null by id and never listed; add read_all_orders)\n"
		 "  --record FILE            write the event stream as JSONL (same seed => same bytes)\n"
		 "\n"
		 "Delivery (only with --deliver-to):\n"
		 "  --deliver-to URL         POST each event to URL/hooks/<source name>\n"
		 "  --rate PER_SEC           events generated per second (default 0: as fast as possible)\n"
		 "  --duplicate P            probability an event is delivered twice (default 0)\n"
		 "  --reorder-ms MAX         random delay of each delivery in [0, MAX] ms (default 0)\n"
		 "  --drop P                 probability an event is never delivered (default 0)\n"
		 "  --concurrency N          parallel connections (default 4)\n"
		 "  --retry-base-ms MS       first retry delay of a non-2xx answer, doubling (default 1000)\n"
		 "  --retry-max-ms MS        cap of the retry delay (default 60000)\n"
		 "  --max-attempts N         attempts per delivery before giving up (default 8)\n"
		 "  --timeout SECS           per attempt (default 10)\n"
		 "\n"
		 "API:\n"
		 "  --listen HOST:PORT       address of the read API (port 0 picks a free one)\n"
		 "  --api-token T            require Authorization: Bearer T / X-Shopify-Access-Token: T\n"
		 "  --request-log FILE       write one line per API request: METHOD path?query\n"
		 "  --request-times FILE     one line per API request: EPOCH.USEC METHOD path?query ACCOUNT\n"
		 "                           (its Stripe-Account, - without one)\n"
		 "  --rate-limit             enforce the providers' documented rate limits, answering as\n"
		 "                           they do past them: Stripe 100/s for a live key, 25/s for any\n"
		 "                           other, 25/s per endpoint (429, Stripe-Rate-Limited-Reason);\n"
		 "                           GitHub 900 a minute per endpoint (403, retry-after) and 5,000\n"
		 "                           an hour per installation (unless --github-rate-limit)\n"
		 "  --idempotency-ttl SECS   how long an Idempotency-Key is kept (default 86400)\n"
		 "  --shopify-bucket MAX:RATE\n"
		 "                           Shopify GraphQL cost bucket: MAX points, restored RATE/s\n"
		 "                           (default 2000:100, the Standard plan's)\n"
		 "  --fault-429 SHARE        answer 429 to SHARE of API calls\n"
		 "  --retry-after SECS       Retry-After of injected 429s (default 1)\n"
		 "  --fault-5xx SHARE        answer 500 or 503 to SHARE of API calls\n"
		 "  --slow SHARE:MS          delay SHARE of API calls by MS\n"
		 "  --fault-drop-after-accept SHARE\n"
		 "                           perform SHARE of refunds, then close without answering\n"
		 "\n"
		 "Prints 'listening on HOST:PORT' when ready; SIGTERM exits 0.");
}

static int
parse_listen(const char *arg, serve_opts *o)
{
	const char *colon = strrchr(arg, ':');
	int64_t		port;

	if (colon == NULL || colon == arg || (size_t) (colon - arg) >= sizeof(o->host) ||
		parse_int64(colon + 1, 0, 65535, &port) != 0)
		return -1;
	memcpy(o->host, arg, (size_t) (colon - arg));
	o->host[colon - arg] = '\0';
	o->port = (int) port;
	return 0;
}

static void
render_status(void *arg, sbuf *out)
{
	serve_ctx  *c = arg;
	const dlv_stats *s = c->dlv ? dlv_get_stats(c->dlv) : NULL;
	int			done = c->gen_done && (c->dlv == NULL || dlv_idle(c->dlv));

	size_t		i;
	int			first = 1;

	sb_printf(out, "{\"generated\":%ld,\"delivered\":%ld,\"acked\":%ld,\"dropped\":%ld,"
			  "\"duplicated\":%ld,\"attempts\":%ld,\"failed\":%ld,\"dropped_types\":{",
			  c->generated, s ? s->first_sent : 0, s ? s->acked : 0, c->dropped,
			  c->duplicated, s ? s->attempts : 0, s ? s->failed : 0);
	for (i = 0; i < c->dropped_by.cap; i++)
	{
		if (c->dropped_by.keys[i] == NULL)
			continue;
		if (!first)
			sb_putc(out, ',');
		first = 0;
		sb_json_str(out, c->dropped_by.keys[i]);
		sb_printf(out, ":%ld", c->dropped_by.vals[i]);
	}
	sb_putc(out, '}');
	if (c->opt->connect_accounts > 0)
	{
		first = 1;
		sb_puts(out, ",\"dropped_accounts\":{");
		for (i = 0; i < c->dropped_accounts.cap; i++)
		{
			if (c->dropped_accounts.keys[i] == NULL)
				continue;
			if (!first)
				sb_putc(out, ',');
			first = 0;
			sb_json_str(out, c->dropped_accounts.keys[i]);
			sb_printf(out, ":%ld", c->dropped_accounts.vals[i]);
		}
		sb_putc(out, '}');
	}
	sb_printf(out, ",\"done\":%s}", done ? "true" : "false");
}

/* Print the status line once, when generation and delivery are finished. */
static void
maybe_report_done(serve_ctx *c)
{
	sbuf		b;

	if (c->reported || !c->gen_done || (c->dlv && !dlv_idle(c->dlv)))
		return;
	c->reported = 1;
	sb_init(&b);
	render_status(c, &b);
	printf("status %s\n", b.data);
	sb_free(&b);
}

/* Record and deliver one generated event. */
static void
emit(serve_ctx *c, sim_event *ev)
{
	c->generated++;
	if (c->api && c->sources[ev->source].kind == WI_KIND_github)
		api_github_app_event(c->api, ev);
	if (c->record && !c->record_failed)
	{
		sbuf		line;

		sb_init(&line);
		event_record_line(&c->model, ev, &line);
		if (fwrite(line.data, 1, line.len, c->record) != line.len)
			c->record_failed = 1;
		sb_free(&line);
	}
	if (c->dlv)
	{
		const sim_source *src = &c->sources[ev->source];
		double		d = rng_double(&c->chaos),
					u = rng_double(&c->chaos);
		int			delay1 = (int) rng_below(&c->chaos, (uint64_t) c->opt->reorder_ms + 1),
					delay2 = (int) rng_below(&c->chaos, (uint64_t) c->opt->reorder_ms + 1);

		if (d < c->opt->drop)
		{
			long		n = idmap_get(&c->dropped_by, ev->type);

			c->dropped++;
			idmap_put(&c->dropped_by, ev->type, n < 0 ? 1 : n + 1);
			if (ev->account[0] != '\0')
			{
				n = idmap_get(&c->dropped_accounts, ev->account);
				idmap_put(&c->dropped_accounts, ev->account, n < 0 ? 1 : n + 1);
			}
		}
		else
		{
			dlv_submit(c->dlv, src, ev->seq, &ev->headers, ev->body, ev->body_len, delay1);
			if (u < c->opt->duplicate)
			{
				c->duplicated++;
				dlv_submit(c->dlv, src, ev->seq, &ev->headers, ev->body, ev->body_len, delay2);
			}
		}
	}
}

static void
finish_generation(serve_ctx *c)
{
	c->gen_done = 1;
	if (c->record)
	{
		if (fclose(c->record) != 0)
			c->record_failed = 1;
		c->record = NULL;
		if (c->record_failed)
			fprintf(stderr, "webhook-sim serve: could not write the record file\n");
	}
}

/*
 * Generation tick: with a rate, catch up with the schedule (rate * elapsed);
 * without, generate a batch and yield to the loop so the API stays
 * responsive.
 */
static void
gen_cb(evutil_socket_t fd, short what, void *arg)
{
	serve_ctx  *c = arg;
	long		budget = GEN_BATCH;
	struct timeval tv = {0, 0};
	sim_event	ev;

	(void) fd;
	(void) what;
	if (c->opt->rate > 0)
	{
		long		due = (long) ((now_monotonic() - c->start) * c->opt->rate) + 1;

		budget = due - c->generated;
		if (budget > GEN_BATCH)
			budget = GEN_BATCH;
		tv.tv_usec = 10000;
	}
	while (budget-- > 0)
	{
		if (!model_next_event(&c->model, &ev))
		{
			finish_generation(c);
			break;
		}
		emit(c, &ev);
		sim_event_free(&ev);
	}
	if (c->record)
		fflush(c->record);
	if (!c->gen_done)
		evtimer_add(c->gen_ev, &tv);
}

/* Periodic check for the end of delivery (prints the status line). */
static void
check_cb(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	maybe_report_done(arg);
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
	serve_ctx  *c = arg;

	(void) sig;
	(void) what;
	event_base_loopexit(c->base, NULL);
}

/* Parse argv into o and the sources; returns 0, or an exit code. */
static int
parse_args(int argc, char **argv, serve_opts *o, serve_ctx *c)
{
	static const struct option longopts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"seed", required_argument, NULL, 's'},
		{"objects", required_argument, NULL, 'o'},
		{"events", required_argument, NULL, 'e'},
		SIM_KIND_OPTIONS
		{"deliver-to", required_argument, NULL, 4},
		{"record", required_argument, NULL, 5},
		{"duplicate", required_argument, NULL, 6},
		{"reorder-ms", required_argument, NULL, 7},
		{"drop", required_argument, NULL, 8},
		{"concurrency", required_argument, NULL, 9},
		{"rate", required_argument, NULL, 10},
		{"thin-share", required_argument, NULL, 11},
		{"connect-accounts", required_argument, NULL, 29},
		{"shopify-shops", required_argument, NULL, 44},
		{"shopify-token-ttl", required_argument, NULL, 45},
		{"shopify-client-id", required_argument, NULL, 46},
		{"shopify-old-orders", required_argument, NULL, 50},
		{"shopify-scopes", required_argument, NULL, 51},
		{"retry-base-ms", required_argument, NULL, 12},
		{"retry-max-ms", required_argument, NULL, 13},
		{"max-attempts", required_argument, NULL, 14},
		{"timeout", required_argument, NULL, 15},
		{"api-token", required_argument, NULL, 16},
		{"request-log", required_argument, NULL, 17},
		{"request-times", required_argument, NULL, 48},
		{"rate-limit", no_argument, NULL, 49},
		{"types", required_argument, NULL, 23},
		{"epoch", required_argument, NULL, 24},
		{"idempotency-ttl", required_argument, NULL, 25},
		{"shopify-bucket", required_argument, NULL, 28},
		{"github-repo", required_argument, NULL, 27},
		{"github-app", required_argument, NULL, 40},
		{"github-app-key", required_argument, NULL, 41},
		{"github-installation", required_argument, NULL, 42},
		{"github-token-ttl", required_argument, NULL, 43},
		{"github-rate-limit", required_argument, NULL, 47},
		{"fault-429", required_argument, NULL, 18},
		{"retry-after", required_argument, NULL, 19},
		{"fault-5xx", required_argument, NULL, 20},
		{"slow", required_argument, NULL, 21},
		{"fault-drop-after-accept", required_argument, NULL, 22},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	int			ch,
				have_listen = 0;
	int64_t		v;
	char		err[200];
	int			li;

	memset(o, 0, sizeof(*o));
	o->seed = 1;
	o->objects = 100;
	o->events = 1000;
	o->concurrency = 4;
	o->retry_after = 1;
	o->types = model_default_types();
	o->epoch = INT64_MIN;
	o->api.idempotency_ttl = 86400;
	o->policy.max_attempts = 8;
	o->policy.retry_base_ms = 1000;
	o->policy.retry_max_ms = 60000;
	o->policy.timeout_s = 10;
	opterr = 0;
	optind = 1;
	while ((li = -1, ch = getopt_long(argc, argv, ":h", longopts, &li)) != -1)
	{
		int			bad = 0;

		/* --KIND NAME:SECRET, for the kinds the model has events of */
		if (ch >= SIM_OPT_KIND && ch < SIM_OPT_KIND + WI_NUM_SOURCE_KINDS)
		{
			sign_kind	k = (sign_kind) (ch - SIM_OPT_KIND);

			if (!model_has_events(k))
				return usage_error(CMD, "--%s: no %s provider is simulated (replay re-sends recorded %s events)",
								   sign_kind_name(k), sign_kind_name(k), sign_kind_name(k));
			if (source_add(c->sources, &c->nsources, k, optarg, err, sizeof(err)) != 0)
				return usage_error(CMD, "%s", err);
			continue;
		}
		switch (ch)
		{
			case 'h':
				serve_help();
				return -1;
			case 'l':
				bad = parse_listen(optarg, o) != 0;
				have_listen = 1;
				break;
			case 's':
				bad = parse_int64(optarg, 0, INT64_MAX, &v) != 0;
				o->seed = (uint64_t) v;
				break;
			case 'o':
				bad = parse_int64(optarg, 0, 10000000, &v) != 0;
				o->objects = (long) v;
				break;
			case 'e':
				bad = parse_int64(optarg, 0, 100000000, &v) != 0;
				o->events = (long) v;
				break;
			case 4:
				o->deliver_to = optarg;
				break;
			case 5:
				o->record = optarg;
				break;
			case 6:
				bad = parse_share(optarg, &o->duplicate) != 0;
				break;
			case 7:
				bad = parse_int64(optarg, 0, 3600000, &v) != 0;
				o->reorder_ms = (int) v;
				break;
			case 8:
				bad = parse_share(optarg, &o->drop) != 0;
				break;
			case 9:
				bad = parse_int64(optarg, 1, 1024, &v) != 0;
				o->concurrency = (int) v;
				break;
			case 10:
				{
					char	   *end;

					o->rate = strtod(optarg, &end);
					bad = *optarg == '\0' || *end != '\0' || !(o->rate >= 0 && o->rate <= 1e7);
					break;
				}
			case 11:
				bad = parse_share(optarg, &o->thin_share) != 0;
				break;
			case 29:
				bad = parse_int64(optarg, 0, 10000, &v) != 0;
				o->connect_accounts = (int) v;
				break;
			case 44:
				bad = parse_int64(optarg, 0, 1000, &v) != 0;
				o->shopify_shops = (int) v;
				break;
			case 45:
				bad = parse_int64(optarg, 1, 86400, &v) != 0;
				o->api.shopify_token_ttl = (int) v;
				break;
			case 46:
				bad = optarg[0] == '\0' || strlen(optarg) > 100;
				o->api.shopify_client_id = optarg;
				break;
			case 50:
				bad = parse_int64(optarg, 0, 1000000, &v) != 0;
				o->shopify_old_orders = (long) v;
				break;
			case 51:
				bad = strlen(optarg) > 1000 || strspn(optarg, "abcdefghijklmnopqrstuvwxyz_,") != strlen(optarg);
				o->api.shopify_scopes = optarg;
				break;
			case 12:
				bad = parse_int64(optarg, 1, 86400000, &v) != 0;
				o->policy.retry_base_ms = (int) v;
				break;
			case 13:
				bad = parse_int64(optarg, 1, 86400000, &v) != 0;
				o->policy.retry_max_ms = (int) v;
				break;
			case 14:
				bad = parse_int64(optarg, 1, 1000, &v) != 0;
				o->policy.max_attempts = (int) v;
				break;
			case 15:
				bad = parse_int64(optarg, 1, 3600, &v) != 0;
				o->policy.timeout_s = (int) v;
				break;
			case 16:
				o->api.api_token = optarg;
				break;
			case 17:
				o->api.request_log = optarg;
				break;
			case 48:
				o->api.request_times = optarg;
				break;
			case 49:
				o->api.rate_limit = 1;
				break;
			case 23:
				o->types = model_parse_types(optarg);
				bad = o->types == 0;
				break;
			case 24:
				if (strcmp(optarg, "now") == 0)
					o->epoch = INT64_MIN;
				else
				{
					bad = parse_int64(optarg, 0, INT64_MAX / 4, &v) != 0;
					o->epoch = v;
				}
				break;
			case 25:
				bad = parse_int64(optarg, 1, 86400 * 30, &v) != 0;
				o->api.idempotency_ttl = (int) v;
				break;
			case 28:
				{
					/* MAX:RATE, the GraphQL cost bucket and its restore rate per second */
					double		mx = 0,
								rt = 0;
					int			used = 0;

					bad = sscanf(optarg, "%lf:%lf%n", &mx, &rt, &used) != 2 || optarg[used] != '\0' ||
						mx < 1 || mx > 1e6 || rt <= 0 || rt > 1e6;
					o->api.shopify_bucket_max = mx;
					o->api.shopify_bucket_rate = rt;
				}
				break;
			case 27:
				{
					/* OWNER/NAME, or several comma-separated (at most SIM_MAX_REPOS) */
					const char *p = optarg;
					int			n = 0;

					o->repo = optarg;
					bad = strlen(optarg) >= 100 || *p == '\0';
					while (!bad && *p)
					{
						size_t		len = strcspn(p, ",");
						const char *sl = memchr(p, '/', len);

						bad = sl == NULL || sl == p || (size_t) (sl - p) == len - 1 ||
							memchr(sl + 1, '/', len - (size_t) (sl - p) - 1) != NULL || ++n > SIM_MAX_REPOS ||
							(p[len] == ',' && p[len + 1] == '\0');
						p += len + (p[len] == ',' ? 1 : 0);
					}
					break;
				}
			case 40:
				{
					char	   *colon = strchr(optarg, ':');

					if (colon)
					{
						*colon = '\0';
						o->api.github_app.client_id = colon + 1;
					}
					o->api.github_app.app_id = optarg;
					bad = parse_int64(optarg, 1, INT64_MAX, &v) != 0 ||
						(colon && (colon[1] == '\0' || strlen(colon + 1) > 100));
					break;
				}
			case 41:
				o->api.github_app.key_file = optarg;
				break;
			case 42:
				bad = o->api.github_app.ninstallations == GH_APP_MAX_INSTALLATIONS;
				if (!bad)
					o->api.github_app.installations[o->api.github_app.ninstallations++] = optarg;
				break;
			case 43:
				bad = parse_int64(optarg, 1, 86400, &v) != 0;
				o->api.github_app.token_ttl = (int) v;
				break;
			case 47:
				{
					/* N[/SECS]: requests per installation per window */
					const char *sl = strchr(optarg, '/');
					char	   *n = sl ? xstrndup(optarg, (size_t) (sl - optarg)) : xstrdup(optarg);
					int64_t		w = 3600;

					bad = parse_int64(n, 1, 1000000, &v) != 0 ||
						(sl != NULL && parse_int64(sl + 1, 1, 86400, &w) != 0);
					free(n);
					o->api.github_app.rate_limit = (int) v;
					o->api.github_app.rate_window = (int) w;
					break;
				}
			case 18:
				bad = parse_share(optarg, &o->fault_429) != 0;
				break;
			case 19:
				bad = parse_int64(optarg, 0, 86400, &v) != 0;
				o->retry_after = (int) v;
				break;
			case 20:
				bad = parse_share(optarg, &o->fault_5xx) != 0;
				break;
			case 21:
				{
					char	   *colon = strchr(optarg, ':');
					fault_rule *f = &o->faults[o->nfaults];

					if (colon == NULL || o->nfaults >= 6)
					{
						bad = 1;
						break;
					}
					*colon = '\0';
					memset(f, 0, sizeof(*f));
					f->mode = FAULT_SLOW;
					f->count = -1;
					bad = parse_share(optarg, &f->share) != 0 ||
						parse_int64(colon + 1, 0, 600000, &v) != 0;
					*colon = ':';
					f->ms = (int) v;
					o->nfaults++;
					break;
				}
			case 22:
				{
					fault_rule *f = &o->faults[o->nfaults];

					if (o->nfaults >= 6)
					{
						bad = 1;
						break;
					}
					memset(f, 0, sizeof(*f));
					f->mode = FAULT_DROP;
					f->count = -1;
					bad = parse_share(optarg, &f->share) != 0;
					o->nfaults++;
					break;
				}
			default:
				return option_error(CMD, argc, argv, ch);
		}
		if (bad)
			return usage_error(CMD, "invalid value \"%s\" for --%s", optarg,
							   li >= 0 ? longopts[li].name : "?");
	}
	if (optind < argc)
		return usage_error(CMD, "unexpected argument \"%s\"", argv[optind]);
	if (!have_listen)
		return usage_error(CMD, "--listen HOST:PORT is required");
	if (c->nsources == 0)
		return usage_error(CMD, "at least one of --stripe, --shopify, --standard or --github is required");
	if (o->policy.retry_max_ms < o->policy.retry_base_ms)
		o->policy.retry_max_ms = o->policy.retry_base_ms;
	o->api.seed = o->seed;
	/* status faults first, so a slow rule never hides them */
	if (o->fault_429 > 0)
	{
		fault_rule *f = &o->faults[o->nfaults++];

		memset(f, 0, sizeof(*f));
		f->status = 429;
		f->share = o->fault_429;
		f->retry_after = o->retry_after;
		f->count = -1;
	}
	if (o->fault_5xx > 0)
	{
		fault_rule *f = &o->faults[o->nfaults++];

		memset(f, 0, sizeof(*f));
		f->status = 0;
		f->share = o->fault_5xx;
		f->retry_after = o->retry_after;
		f->count = -1;
	}
	/* GitHub's documented minimum for an installation, unless given */
	if (o->api.rate_limit && o->api.github_app.rate_limit == 0)
	{
		o->api.github_app.rate_limit = 5000;
		o->api.github_app.rate_window = 3600;
	}
	return 0;
}

int
cmd_serve(int argc, char **argv)
{
	serve_opts	opt;
	serve_ctx	c;
	char		err[256];
	int			rc = 1,
				i;
	struct event *sigterm = NULL,
			   *sigint = NULL;
	struct timeval zero = {0, 0},
				tick = {0, 100000};

	memset(&c, 0, sizeof(c));
	c.opt = &opt;
	rc = parse_args(argc, argv, &opt, &c);
	if (rc != 0)
	{
		rc = rc < 0 ? 0 : rc;
		goto err;
	}
	rc = 1;
	model_init(&c.model, opt.seed, opt.objects, opt.events, opt.thin_share,
			   opt.epoch == INT64_MIN ? now_epoch() : opt.epoch, opt.types, opt.repo,
			   c.sources, c.nsources);
	model_set_connect(&c.model, opt.connect_accounts);
	model_set_shops(&c.model, opt.shopify_shops);
	c.model.old_orders = opt.shopify_old_orders;
	for (int s = 0; s < c.nsources; s++)
		if (c.sources[s].kind == WI_KIND_shopify && opt.api.shopify_client_secret == NULL)
			opt.api.shopify_client_secret = c.sources[s].secret;
	/* live: the clock follows real time, so Stripe's created filters work */
	c.model.follow_wall = opt.deliver_to != NULL && opt.epoch == INT64_MIN;
	rng_seed(&c.chaos, opt.seed ^ 0xc4a05c4a05ULL);
	if (opt.record)
	{
		c.record = fopen(opt.record, "w");
		if (c.record == NULL)
		{
			fprintf(stderr, "webhook-sim serve: cannot open record file \"%s\"\n", opt.record);
			goto err;
		}
	}
	c.base = event_base_new();
	if (c.base == NULL)
	{
		fprintf(stderr, "webhook-sim serve: cannot create event base\n");
		goto err;
	}

	if (opt.deliver_to)
	{
		c.dlv = dlv_new(c.base, opt.deliver_to, opt.concurrency, &opt.policy, err, sizeof(err));
		if (c.dlv == NULL)
		{
			rc = usage_error(CMD, "--deliver-to: %s", err);
			goto err;
		}
	}
	else
	{
		/* no receiver: the truth is the final state of the whole scenario */
		sim_event	ev;

		while (model_next_event(&c.model, &ev))
		{
			emit(&c, &ev);
			sim_event_free(&ev);
		}
		finish_generation(&c);
	}

	c.api = api_start(c.base, &c.model, opt.host, opt.port, &opt.api,
					  render_status, &c, err, sizeof(err));
	if (c.api == NULL)
	{
		fprintf(stderr, "webhook-sim serve: %s\n", err);
		goto err;
	}
	for (i = 0; i < opt.nfaults; i++)
		api_add_fault(c.api, &opt.faults[i]);

	sigterm = evsignal_new(c.base, SIGTERM, signal_cb, &c);
	sigint = evsignal_new(c.base, SIGINT, signal_cb, &c);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	c.check_ev = event_new(c.base, -1, EV_PERSIST, check_cb, &c);
	event_add(c.check_ev, &tick);

	printf("listening on %s:%d\n", opt.host, api_port(c.api));
	fflush(stdout);

	c.start = now_monotonic();
	if (!c.gen_done)
	{
		c.gen_ev = evtimer_new(c.base, gen_cb, &c);
		evtimer_add(c.gen_ev, &zero);
	}
	event_base_dispatch(c.base);
	rc = c.record_failed ? 1 : 0;

err:
	if (c.record)
		fclose(c.record);
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	if (c.gen_ev)
		event_free(c.gen_ev);
	if (c.check_ev)
		event_free(c.check_ev);
	api_stop(c.api);
	dlv_free(c.dlv);
	if (c.base)
		event_base_free(c.base);
	model_free(&c.model);
	idmap_free(&c.dropped_by);
	idmap_free(&c.dropped_accounts);
	for (i = 0; i < c.nsources; i++)
		source_free(&c.sources[i]);
	return rc;
}
