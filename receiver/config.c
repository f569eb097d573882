/*
 * config.c
 *		Settings of the receiver, from flags and an optional "key = value"
 *		file, described by one table so that the flag parser, the file parser
 *		and the error messages cannot disagree.
 *
 * Precedence: built-in defaults, then the --config file, then flags.  Any
 * invalid value is reported on one line that names the setting; the caller
 * turns that into exit status 2.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libpq-fe.h>

#include "log.h"

typedef enum setting_type
{
	SET_STRING,					/* char * */
	SET_LONG,					/* plain integer */
	SET_BYTES,					/* integer with optional k/m/g suffix */
	SET_MS,						/* duration; bare numbers in the unit below */
	SET_LISTEN,					/* HOST:PORT */
	SET_ADMIN,					/* HOST:PORT or off */
	SET_LOGLEVEL
} setting_type;

typedef struct setting
{
	const char *name;
	setting_type type;
	size_t		offset;
	long		min;
	long		max;
	long		unit_ms;		/* SET_MS: milliseconds per bare unit */
	const char *help;
} setting;

#define OFF(f) offsetof(rcv_config, f)

static const setting settings[] = {
	{"db", SET_STRING, OFF(db), 0, 0, 0,
	"libpq connection string of the database (required)"},
	{"listen", SET_LISTEN, 0, 0, 0, 0,
	"address and port to serve providers on (default 127.0.0.1:8080)"},
	{"admin-listen", SET_ADMIN, 0, 0, 0, 0,
	"address for /metrics and /readyz, or off (default 127.0.0.1:9180)"},
	{"tls-cert", SET_STRING, OFF(tls_cert), 0, 0, 0,
	"PEM certificate chain; serve HTTPS (needs --tls-key)"},
	{"tls-key", SET_STRING, OFF(tls_key), 0, 0, 0,
	"PEM private key for --tls-cert"},
	{"max-body", SET_BYTES, OFF(max_body), 1, 64L << 20, 0,
	"largest accepted body, bytes, k/m suffix (default 1m)"},
	{"max-header", SET_BYTES, OFF(max_header), 1024, 1L << 20, 0,
	"largest accepted request head, bytes (default 16k)"},
	{"read-timeout", SET_MS, OFF(read_timeout_ms), 100, 3600000, 1000,
	"seconds (or NNNms) a client may take to send a request (default 10)"},
	{"max-connections", SET_LONG, OFF(max_connections), 1, 100000, 0,
	"open client connections at most; past it the oldest unfinished request is shed (default 1024)"},
	{"max-connections-per-address", SET_LONG, OFF(max_per_address), 0, 100000, 0,
	"connections from one client address (IPv6: one /64) at most, 0 for no cap (default 256)"},
	{"max-buffered", SET_BYTES, OFF(max_buffered), 1024, 1L << 40, 0,
	"bytes of unanswered requests held for all clients; past it 503 (default 64m)"},
	{"batch-size", SET_LONG, OFF(batch_size), 1, 10000, 0,
	"deliveries per group-commit transaction at most (default 64)"},
	{"batch-delay", SET_MS, OFF(batch_delay_ms), 0, 10000, 1,
	"milliseconds a batch waits to fill up (default 0: at once)"},
	{"db-connections", SET_LONG, OFF(db_connections), 1, 64, 0,
	"database connections sharing the batches (default 1)"},
	{"db-pipeline", SET_LONG, OFF(db_pipeline), 1, RCV_PIPELINE_MAX, 0,
	"batches in flight on one database connection at most (default 2)"},
	{"commit-timeout", SET_MS, OFF(commit_timeout_ms), 100, 600000, 1,
	"milliseconds before a silent database is given up (default 10000)"},
	{"retry-after", SET_LONG, OFF(retry_after), 0, 86400, 0,
	"seconds sent in Retry-After with 503 (default 5)"},
	{"log-level", SET_LOGLEVEL, OFF(log_level), 0, 0, 0,
	"error, warning, info or debug (default info)"},
	{"test-now", SET_LONG, OFF(test_now), 1, LONG_MAX, 0,
	NULL},						/* tests only: not shown in --help */
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static void
set_defaults(rcv_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->listen_host = strdup("127.0.0.1");
	cfg->listen_port = 8080;
	cfg->admin_host = strdup("127.0.0.1");
	cfg->admin_port = 9180;
	cfg->max_body = 1L << 20;
	cfg->max_header = 16L << 10;
	cfg->read_timeout_ms = 10000;
	cfg->max_connections = 1024;
	cfg->max_per_address = 256;
	cfg->max_buffered = 64L << 20;
	cfg->batch_size = 64;
	cfg->batch_delay_ms = 0;
	cfg->commit_timeout_ms = 10000;
	cfg->db_connections = 1;
	cfg->db_pipeline = 2;
	cfg->retry_after = 5;
	cfg->log_level = RCV_LOG_INFO;
}

/* Setting by name; "max_body" is accepted for "max-body" in files. */
static const setting *
find_setting(const char *name)
{
	char		norm[64];
	size_t		n = strlen(name);

	if (n >= sizeof(norm))
		return NULL;
	for (size_t i = 0; i <= n; i++)
		norm[i] = name[i] == '_' ? '-' : name[i];
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(settings[i].name, norm) == 0)
			return &settings[i];
	return NULL;
}

/*
 * parse_number
 *		Decimal integer with an optional suffix; mult_for_suffix decides what
 *		suffixes mean for the setting's type.  Returns 0 or -1.
 */
static int
parse_number(const setting *s, const char *value, long *out)
{
	char	   *end;
	long		v;
	long		mult = 1;

	errno = 0;
	if (!isdigit((unsigned char) value[0]))
		return -1;
	v = strtol(value, &end, 10);
	if (errno != 0)
		return -1;
	if (s->type == SET_BYTES)
	{
		if (strcasecmp(end, "k") == 0 || strcasecmp(end, "kb") == 0)
			mult = 1L << 10, end += strlen(end);
		else if (strcasecmp(end, "m") == 0 || strcasecmp(end, "mb") == 0)
			mult = 1L << 20, end += strlen(end);
		else if (strcasecmp(end, "g") == 0 || strcasecmp(end, "gb") == 0)
			mult = 1L << 30, end += strlen(end);
	}
	else if (s->type == SET_MS)
	{
		mult = s->unit_ms;
		if (strcmp(end, "ms") == 0)
			mult = 1, end += 2;
		else if (strcmp(end, "s") == 0)
			mult = 1000, end += 1;
	}
	if (*end != '\0' || v > LONG_MAX / mult)
		return -1;
	*out = v * mult;
	return 0;
}

/* Describe the accepted range of s for an error message. */
static void
describe(const setting *s, char *buf, size_t size)
{
	switch (s->type)
	{
		case SET_LISTEN:
			snprintf(buf, size, "expected HOST:PORT");
			break;
		case SET_ADMIN:
			snprintf(buf, size, "expected HOST:PORT or off");
			break;
		case SET_LOGLEVEL:
			snprintf(buf, size, "expected error, warning, info or debug");
			break;
		case SET_BYTES:
			snprintf(buf, size, "expected a size between %ld and %ld bytes",
					 s->min, s->max);
			break;
		case SET_MS:
			snprintf(buf, size, "expected a duration between %ldms and %ldms",
					 s->min, s->max);
			break;
		case SET_STRING:
			snprintf(buf, size, "expected a non-empty value");
			break;
		default:
			snprintf(buf, size, "expected an integer between %ld and %ld",
					 s->min, s->max);
	}
}

/*
 * parse_hostport
 *		"HOST:PORT" or "[v6]:PORT" into *host (replacing it) and *port.
 *		Returns 0, or -1 leaving both as they were.
 */
static int
parse_hostport(const char *value, char **host, int *port)
{
	const char *colon = strrchr(value, ':');
	char	   *end;
	char	   *h;
	long		p;

	if (colon == NULL || colon == value)
		return -1;
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p < 0 || p > 65535)
		return -1;
	h = strndup(value, (size_t) (colon - value));
	if (h == NULL)
		return -1;
	/* [::1]:8080 */
	if (h[0] == '[')
	{
		size_t		n = strlen(h);

		if (n < 3 || h[n - 1] != ']')
		{
			free(h);
			return -1;
		}
		memmove(h, h + 1, n - 2);
		h[n - 2] = '\0';
	}
	free(*host);
	*host = h;
	*port = (int) p;
	return 0;
}

/*
 * apply
 *		Store value into the setting s of cfg.  Returns 0, or -1 after
 *		printing the one-line error (which quotes the value unless it may be
 *		a secret: the connection string can carry a password).
 */
static int
apply(rcv_config *cfg, const setting *s, const char *value, const char *where)
{
	char		range[96];
	char	   *base = (char *) cfg;

	switch (s->type)
	{
		case SET_STRING:
			{
				char	  **slot = (char **) (base + s->offset);

				if (*value == '\0')
					goto bad;
				free(*slot);
				*slot = strdup(value);
				return *slot ? 0 : -1;
			}
		case SET_LISTEN:
			if (parse_hostport(value, &cfg->listen_host, &cfg->listen_port) != 0)
				goto bad;
			return 0;
		case SET_ADMIN:
			if (strcmp(value, "off") == 0)
			{
				free(cfg->admin_host);
				cfg->admin_host = NULL;
				cfg->admin_port = 0;
				return 0;
			}
			if (parse_hostport(value, &cfg->admin_host, &cfg->admin_port) != 0)
				goto bad;
			return 0;
		case SET_LOGLEVEL:
			{
				rcv_log_level l;

				if (rcv_log_parse_level(value, &l) != 0)
					goto bad;
				*(int *) (base + s->offset) = (int) l;
				return 0;
			}
		default:
			{
				long		v;

				if (parse_number(s, value, &v) != 0 || v < s->min || v > s->max)
					goto bad;
				*(long *) (base + s->offset) = v;
				return 0;
			}
	}
bad:
	describe(s, range, sizeof(range));
	if (strcmp(s->name, "db") == 0)
		fprintf(stderr, "webhook-receiver: invalid value for %s%s (%s)\n",
				s->name, where, range);
	else
		fprintf(stderr, "webhook-receiver: invalid value for %s%s: \"%.64s\" (%s)\n",
				s->name, where, value, range);
	return -1;
}

/* Strip leading and trailing blanks of s in place; returns the start. */
static char *
strip(char *s)
{
	char	   *e;

	while (isspace((unsigned char) *s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char) e[-1]))
		*--e = '\0';
	return s;
}

/*
 * load_file
 *		Read "key = value" lines ('#' starts a comment line; a value may be
 *		wrapped in single or double quotes).  Returns 0 or -1 after the error.
 */
static int
load_file(rcv_config *cfg, const char *path)
{
	FILE	   *f = NULL;
	char		line[4096];
	char		where[300];
	int			lineno = 0;
	int			rc = -1;

	f = fopen(path, "r");
	if (f == NULL)
	{
		fprintf(stderr, "webhook-receiver: invalid value for config: cannot open \"%s\"\n",
				path);
		goto err;
	}
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *p = strip(line);
		char	   *eq;
		char	   *key;
		char	   *value;
		const setting *s;

		lineno++;
		if (*p == '\0' || *p == '#')
			continue;
		eq = strchr(p, '=');
		if (eq == NULL)
		{
			fprintf(stderr, "webhook-receiver: invalid line %d in config \"%s\": expected key = value\n",
					lineno, path);
			goto err;
		}
		*eq = '\0';
		key = strip(p);
		value = strip(eq + 1);
		if (strlen(value) >= 2 && (value[0] == '"' || value[0] == '\'') &&
			value[strlen(value) - 1] == value[0])
		{
			value[strlen(value) - 1] = '\0';
			value++;
		}
		s = find_setting(key);
		if (s == NULL || strcmp(key, "config") == 0)
		{
			fprintf(stderr, "webhook-receiver: unknown setting \"%.64s\" in config \"%s\" line %d\n",
					key, path, lineno);
			goto err;
		}
		snprintf(where, sizeof(where), " (config line %d)", lineno);
		if (apply(cfg, s, value, where) != 0)
			goto err;
	}
	rc = 0;
err:
	if (f)
		fclose(f);
	return rc;
}

void
rcv_config_usage(FILE *out)
{
	fprintf(out,
			"webhook-receiver: verifies provider webhooks and stores them through\n"
			"webhook_inbox.intake(), acknowledging only what was committed.\n\n"
			"Usage: webhook-receiver --db CONNINFO [--listen HOST:PORT] [options]\n\n"
			"Options:\n"
			"  --config FILE                read settings (key = value) from FILE first\n");
	for (size_t i = 0; i < NSETTINGS; i++)
	{
		char		flag[48];

		if (settings[i].help == NULL)
			continue;
		snprintf(flag, sizeof(flag), "--%s %s", settings[i].name,
				 settings[i].type == SET_STRING ? "VALUE" :
				 settings[i].type == SET_LISTEN ? "HOST:PORT" :
				 settings[i].type == SET_ADMIN ? "HOST:PORT|off" :
				 settings[i].type == SET_LOGLEVEL ? "LEVEL" : "N");
		fprintf(out, "  %-28s %s\n", flag, settings[i].help);
	}
	fprintf(out,
			"  --help                       show this help and exit\n"
			"  --version                    show the version and exit\n\n"
			"Signals: SIGHUP reloads sources; SIGTERM/SIGINT drain and exit.\n"
			"See docs/receiver.md for routes, status codes and metrics.\n");
}

/*
 * flag_value
 *		Value of flag i in argv ("--name value" or "--name=value"), advancing
 *		*i past it; NULL (after the error) when the value is missing.
 */
static const char *
flag_value(int argc, char **argv, int *i, const char *name)
{
	const char *eq = strchr(argv[*i], '=');

	if (eq)
		return eq + 1;
	if (*i + 1 >= argc)
	{
		fprintf(stderr, "webhook-receiver: missing value for %s\n", name);
		return NULL;
	}
	return argv[++(*i)];
}

int
rcv_config_load(rcv_config *cfg, int argc, char **argv)
{
	set_defaults(cfg);

	/* the file first, so that flags override it whatever their order */
	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
		{
			rcv_config_usage(stdout);
			return 1;
		}
		if (strcmp(argv[i], "--version") == 0)
		{
			printf("webhook-receiver %s\n", RCV_VERSION);
			return 1;
		}
		if (strncmp(argv[i], "--config", 8) == 0 &&
			(argv[i][8] == '\0' || argv[i][8] == '='))
		{
			const char *v = flag_value(argc, argv, &i, "config");

			if (v == NULL || load_file(cfg, v) != 0)
				return -1;
		}
	}
	for (int i = 1; i < argc; i++)
	{
		char		name[64];
		const char *arg = argv[i];
		const setting *s;
		const char *v;
		size_t		n;

		if (strncmp(arg, "--", 2) != 0)
		{
			fprintf(stderr, "webhook-receiver: unexpected argument \"%.64s\"\n", arg);
			return -1;
		}
		n = strcspn(arg + 2, "=");
		if (n >= sizeof(name))
			n = sizeof(name) - 1;
		memcpy(name, arg + 2, n);
		name[n] = '\0';
		if (strcmp(name, "config") == 0)
		{
			if (strchr(arg, '=') == NULL)
				i++;
			continue;
		}
		s = find_setting(name);
		if (s == NULL)
		{
			fprintf(stderr, "webhook-receiver: unknown setting \"%s\"\n", name);
			return -1;
		}
		if ((v = flag_value(argc, argv, &i, name)) == NULL ||
			apply(cfg, s, v, "") != 0)
			return -1;
		if (strcmp(s->name, "db") == 0)
			cfg->db_from_flag = 1;
	}

	/* settings that only make sense together */
	if (cfg->db == NULL)
	{
		fprintf(stderr, "webhook-receiver: missing setting db (a libpq connection string)\n");
		return -1;
	}
	if (cfg->admin_host && cfg->admin_port == cfg->listen_port && cfg->admin_port != 0 &&
		strcmp(cfg->admin_host, cfg->listen_host) == 0)
	{
		fprintf(stderr, "webhook-receiver: invalid value for admin-listen: it must differ from listen\n");
		return -1;
	}
	if (cfg->max_buffered < cfg->max_body + cfg->max_header)
	{
		fprintf(stderr, "webhook-receiver: invalid value for max-buffered: it must hold one request of max-body plus max-header\n");
		return -1;
	}
	if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL))
	{
		fprintf(stderr, "webhook-receiver: invalid value for %s: tls-cert and tls-key go together\n",
				cfg->tls_cert ? "tls-key" : "tls-cert");
		return -1;
	}
	return 0;
}

/*
 * rcv_conninfo_has_password
 *		1 when the connection string (key = value or URI) sets a password,
 *		so that the caller can warn that the command line shows it; 0 when
 *		it does not or cannot be parsed (libpq reports that itself).
 */
int
rcv_conninfo_has_password(const char *conninfo)
{
	PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
	int			found = 0;

	if (opts == NULL)
		return 0;
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val && o->val[0] != '\0')
			found = 1;
	PQconninfoFree(opts);
	return found;
}

void
rcv_config_free(rcv_config *cfg)
{
	free(cfg->db);
	free(cfg->listen_host);
	free(cfg->admin_host);
	free(cfg->tls_cert);
	free(cfg->tls_key);
	memset(cfg, 0, sizeof(*cfg));
}
