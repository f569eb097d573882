/*
 * replay.c
 *		`webhook-sim replay`: re-send a recorded stream, freshly signed, in
 *		one of the Shuffle Test's mutations:
 *
 *		shuffled  a random permutation of the events
 *		doubled   every event twice, the 2n sends in a random order
 *		holed     drop round(n * hole-share) events chosen at random, send
 *		          the rest in recorded order
 *
 * Each send is a single attempt (no retries), so the counts printed are
 * exactly what the receiver answered.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "commands.h"
#include "deliver.h"
#include "json.h"
#include "util.h"

#define CMD "replay"

typedef struct rec_event
{
	int			source;			/* index into sources */
	hdr_list	headers;
	char	   *body;
	size_t		len;
} rec_event;

typedef struct replay_ctx
{
	struct event_base *base;
	long		total;
	long		ok;
	long		bad;
} replay_ctx;

static void
replay_help(void)
{
	puts("Usage: webhook-sim replay --file FILE --mode shuffled|doubled|holed --to URL\n"
		 "                          [--KIND NAME:SECRET]...\n"
		 "                          [--hole-share P] [--seed N] [--concurrency N] [--timeout SECS]\n"
		 "\n"
		 "Re-signs every recorded event with the secret of the source of its kind (names\n"
		 "from these flags, not from the record) and POSTs it to URL/hooks/<name>.\n"
		 "KIND is a source kind:" WI_SOURCE_KINDS(SIM_KIND_HELP_) "\n"
		 "  shuffled  a random permutation\n"
		 "  doubled   each event twice, in shuffled order\n"
		 "  holed     drops round(n * P) events (--hole-share, default 0.1), sends the rest in order\n"
		 "Prints: replay mode=M events=N sent=N 2xx=N non-2xx=N dropped=N\n"
		 "Exit 0 if every sent event was answered 2xx, 1 otherwise, 2 for bad usage.");
}

static void
done_cb(void *arg, long tag, int status, int acked)
{
	replay_ctx *c = arg;

	(void) tag;
	(void) status;
	if (acked)
		c->ok++;
	else
		c->bad++;
	if (c->ok + c->bad == c->total)
		event_base_loopexit(c->base, NULL);
}

/*
 * Load the JSONL record.  Returns the number of events (>= 0) or -1 after
 * printing the reason.  Every recorded kind must have a source in sources.
 */
static long
load_record(const char *path, sim_source *sources, int nsources, rec_event **out)
{
	FILE	   *f = fopen(path, "r");
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		n;
	long		count = 0,
				lineno = 0,
				alloc = 0;
	rec_event  *evs = NULL;
	jv		   *doc = NULL;
	char		err[128];

	if (f == NULL)
	{
		fprintf(stderr, "webhook-sim replay: cannot open \"%s\"\n", path);
		return -1;
	}
	while ((n = getline(&line, &cap, f)) >= 0)
	{
		const char *kind,
				   *body;
		const jv   *hdrs;
		rec_event  *e;
		int			s;
		size_t		i;

		lineno++;
		if (n == 0 || (n == 1 && line[0] == '\n'))
			continue;
		doc = jv_parse(line, (size_t) n, err, sizeof(err));
		if (doc == NULL)
		{
			fprintf(stderr, "webhook-sim replay: %s:%ld: %s\n", path, lineno, err);
			goto err;
		}
		kind = jv_string(jv_get(doc, "kind"));
		body = jv_string(jv_get(doc, "body"));
		hdrs = jv_get(doc, "headers");
		if (kind == NULL || body == NULL || (hdrs && hdrs->type != JV_OBJ))
		{
			fprintf(stderr, "webhook-sim replay: %s:%ld: not a recorded event\n", path, lineno);
			goto err;
		}
		for (s = 0; s < nsources; s++)
			if (strcmp(sign_kind_name(sources[s].kind), kind) == 0)
				break;
		if (s == nsources)
		{
			fprintf(stderr, "webhook-sim replay: the record has %s events but no --%s NAME:SECRET was given\n",
					kind, kind);
			goto err;
		}
		if (count == alloc)
		{
			alloc = alloc ? alloc * 2 : 256;
			evs = xrealloc(evs, (size_t) alloc * sizeof(rec_event));
		}
		e = &evs[count++];
		memset(e, 0, sizeof(*e));
		e->source = s;
		e->len = jv_get(doc, "body")->slen;
		e->body = xstrndup(body, e->len);
		for (i = 0; hdrs && i < hdrs->n; i++)
			if (jv_string(hdrs->items[i]))
				hdr_add(&e->headers, hdrs->keys[i], hdrs->items[i]->str);
		jv_free(doc);
		doc = NULL;
	}
	free(line);
	fclose(f);
	*out = evs;
	return count;

err:
	jv_free(doc);
	free(line);
	fclose(f);
	while (count > 0)
	{
		count--;
		hdr_free(&evs[count].headers);
		free(evs[count].body);
	}
	free(evs);
	return -1;
}

static void
shuffle(long *a, long n, sim_rng *r)
{
	long		i;

	for (i = n - 1; i > 0; i--)
	{
		long		j = (long) rng_below(r, (uint64_t) i + 1),
					t = a[i];

		a[i] = a[j];
		a[j] = t;
	}
}

int
cmd_replay(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"file", required_argument, NULL, 'f'},
		{"mode", required_argument, NULL, 'm'},
		{"to", required_argument, NULL, 't'},
		{"hole-share", required_argument, NULL, 'H'},
		{"seed", required_argument, NULL, 's'},
		{"concurrency", required_argument, NULL, 'c'},
		{"timeout", required_argument, NULL, 'T'},
		SIM_KIND_OPTIONS
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	const char *file = NULL,
			   *mode = NULL,
			   *to = NULL;
	double		hole = 0.1;
	int64_t		seed = 1,
				concurrency = 4,
				timeout = 10;
	sim_source	sources[WI_NUM_SOURCE_KINDS];
	int			nsources = 0,
				ch,
				li,
				rc = 1,
				i;
	rec_event  *evs = NULL;
	long		nev = 0,
			   *order = NULL,
				norder = 0,
				k,
				dropped = 0;
	struct event_base *base = NULL;
	dlv_engine *dlv = NULL;
	dlv_policy	pol;
	replay_ctx	ctx;
	sim_rng		rng;
	char		err[200];

	memset(sources, 0, sizeof(sources));
	opterr = 0;
	optind = 1;
	while ((li = -1, ch = getopt_long(argc, argv, ":h", longopts, &li)) != -1)
	{
		int			bad = 0;

		/* --KIND NAME:SECRET, for every source kind */
		if (ch >= SIM_OPT_KIND && ch < SIM_OPT_KIND + WI_NUM_SOURCE_KINDS)
		{
			if (source_add(sources, &nsources, (sign_kind) (ch - SIM_OPT_KIND), optarg,
						   err, sizeof(err)) != 0)
			{
				rc = usage_error(CMD, "%s", err);
				goto err;
			}
			continue;
		}
		switch (ch)
		{
			case 'h':
				replay_help();
				rc = 0;
				goto err;
			case 'f':
				file = optarg;
				break;
			case 'm':
				mode = optarg;
				bad = strcmp(mode, "shuffled") != 0 && strcmp(mode, "doubled") != 0 &&
					strcmp(mode, "holed") != 0;
				break;
			case 't':
				to = optarg;
				break;
			case 'H':
				bad = parse_share(optarg, &hole) != 0;
				break;
			case 's':
				bad = parse_int64(optarg, 0, INT64_MAX, &seed) != 0;
				break;
			case 'c':
				bad = parse_int64(optarg, 1, 1024, &concurrency) != 0;
				break;
			case 'T':
				bad = parse_int64(optarg, 1, 3600, &timeout) != 0;
				break;
			default:
				rc = option_error(CMD, argc, argv, ch);
				goto err;
		}
		if (bad)
		{
			rc = usage_error(CMD, "invalid value \"%s\" for --%s", optarg,
							 li >= 0 ? longopts[li].name : "?");
			goto err;
		}
	}
	if (optind < argc)
	{
		rc = usage_error(CMD, "unexpected argument \"%s\"", argv[optind]);
		goto err;
	}
	if (file == NULL || mode == NULL || to == NULL)
	{
		rc = usage_error(CMD, "--file, --mode and --to are required");
		goto err;
	}
	if (nsources == 0)
	{
		rc = usage_error(CMD, "at least one of --stripe, --shopify, --standard or --github is required");
		goto err;
	}

	nev = load_record(file, sources, nsources, &evs);
	if (nev < 0)
	{
		rc = EXIT_USAGE;
		goto err;
	}

	/* the send order */
	rng_seed(&rng, (uint64_t) seed);
	order = xcalloc((size_t) (2 * nev + 1), sizeof(long));
	if (strcmp(mode, "doubled") == 0)
	{
		for (k = 0; k < 2 * nev; k++)
			order[norder++] = k % nev;
		shuffle(order, norder, &rng);
	}
	else if (strcmp(mode, "shuffled") == 0)
	{
		for (k = 0; k < nev; k++)
			order[norder++] = k;
		shuffle(order, norder, &rng);
	}
	else
	{
		long	   *pick = xcalloc((size_t) nev + 1, sizeof(long));
		char	   *hole_at = xcalloc((size_t) nev + 1, 1);

		dropped = (long) (nev * hole + 0.5);
		for (k = 0; k < nev; k++)
			pick[k] = k;
		shuffle(pick, nev, &rng);
		for (k = 0; k < dropped; k++)
			hole_at[pick[k]] = 1;
		for (k = 0; k < nev; k++)
			if (!hole_at[k])
				order[norder++] = k;
		free(pick);
		free(hole_at);
	}

	base = event_base_new();
	memset(&pol, 0, sizeof(pol));
	pol.max_attempts = 1;
	pol.retry_base_ms = 1;
	pol.retry_max_ms = 1;
	pol.timeout_s = (int) timeout;
	dlv = base ? dlv_new(base, to, (int) concurrency, &pol, err, sizeof(err)) : NULL;
	if (dlv == NULL)
	{
		rc = usage_error(CMD, "--to: %s", base ? err : "cannot create event base");
		goto err;
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.base = base;
	ctx.total = norder;
	dlv_set_done(dlv, done_cb, &ctx);
	for (k = 0; k < norder; k++)
	{
		rec_event  *e = &evs[order[k]];

		dlv_submit(dlv, &sources[e->source], k, &e->headers, e->body, e->len, 0);
	}
	if (norder > 0)
		event_base_dispatch(base);
	printf("replay mode=%s events=%ld sent=%ld 2xx=%ld non-2xx=%ld dropped=%ld\n",
		   mode, nev, norder, ctx.ok, ctx.bad, dropped);
	rc = (ctx.bad == 0 && ctx.ok == norder) ? 0 : 1;

err:
	dlv_free(dlv);
	if (base)
		event_base_free(base);
	for (k = 0; k < nev; k++)
	{
		hdr_free(&evs[k].headers);
		free(evs[k].body);
	}
	free(evs);
	free(order);
	for (i = 0; i < nsources; i++)
		source_free(&sources[i]);
	return rc;
}
