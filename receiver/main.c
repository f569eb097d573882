/*
 * main.c
 *		webhook-receiver: verifies provider webhooks on their raw bytes,
 *		stores them through webhook_inbox.intake() in group-committed
 *		transactions, and acknowledges only what was committed.
 *
 * This file wires the parts together and owns the process lifecycle.
 * Signals are libevent events (redis style: the handler only decides, the
 * loop does the work):
 *	SIGHUP			reload the sources
 *	SIGTERM/SIGINT	stop accepting, answer every open request (the open
 *					batch is flushed and committed), then exit 0; a second
 *					one exits at once with status 1
 *	SIGPIPE			ignored (a client that went away is not fatal)
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "batch.h"
#include "config.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "sources.h"

static struct event_base *base;
static rcv_config cfg;
static int	stopping;
static int	batches_drained;
static int	conns_closed;

/* Exit the loop once both the database side and the clients are done. */
static void
maybe_exit(void)
{
	if (batches_drained && conns_closed)
	{
		rcv_log(RCV_LOG_INFO, "shutdown complete");
		event_base_loopexit(base, NULL);
	}
}

static void
on_batches_drained(void)
{
	/* every answer is on its way; each connection closes once it is sent */
	batches_drained = 1;
	maybe_exit();
}

static void
on_conns_closed(void)
{
	conns_closed = 1;
	maybe_exit();
}

/* Last resort: a drain that cannot finish (a silent database, a client
 * that never reads its answer) must not keep the process alive. */
static void
on_drain_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void) fd;
	(void) what;
	(void) arg;
	rcv_log(RCV_LOG_WARNING, "shutdown deadline reached; exiting");
	event_base_loopexit(base, NULL);
}

static void
on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
	struct event *deadline = arg;
	struct timeval tv = {cfg.commit_timeout_ms / 1000 + 2, 0};

	(void) what;
	if (stopping)
	{
		rcv_log(RCV_LOG_WARNING, "second signal %d: exiting at once", (int) sig);
		_exit(1);
	}
	stopping = 1;
	rcv_log(RCV_LOG_INFO, "signal %d: draining and shutting down", (int) sig);
	evtimer_add(deadline, &tv);
	/* stop accepting first, then flush: requests already read still count */
	rcv_http_shutdown(on_conns_closed);
	rcv_batch_shutdown(on_batches_drained);
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
	(void) sig;
	(void) what;
	(void) arg;
	rcv_log(RCV_LOG_INFO, "SIGHUP: reloading sources");
	rcv_batch_reload_sources();
}

/*
 * hide_db_password
 *		A password in --db is visible to every local user in ps and
 *		/proc/PID/cmdline.  Say so once (without the secret), and overwrite
 *		the argument in place so that it is visible for as short a time as
 *		possible; the copy in cfg is what the receiver uses.
 */
static void
hide_db_password(int argc, char **argv)
{
	if (!cfg.db_from_flag || !rcv_conninfo_has_password(cfg.db))
		return;
	rcv_log(RCV_LOG_WARNING, "--db carries a password, which ps shows to every local user: "
			"use a passfile (~/.pgpass, PGPASSFILE or passfile=), PGPASSWORD, or db in the --config file");
	for (int i = 1; i < argc; i++)
	{
		char	   *v = NULL;

		if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
			v = argv[i + 1];
		else if (strncmp(argv[i], "--db=", 5) == 0)
			v = argv[i] + 5;
		if (v)
			memset(v, 'x', strlen(v));
	}
}

/*
 * make_tls
 *		Server TLS context from the configured PEM files, or NULL after a
 *		one-line error naming the setting.
 */
static SSL_CTX *
make_tls(void)
{
	SSL_CTX    *ctx = SSL_CTX_new(TLS_server_method());

	if (ctx == NULL)
		goto err;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg.tls_cert) != 1)
	{
		fprintf(stderr, "webhook-receiver: invalid value for tls-cert: cannot load \"%s\"\n",
				cfg.tls_cert);
		goto err;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg.tls_key, SSL_FILETYPE_PEM) != 1 ||
		SSL_CTX_check_private_key(ctx) != 1)
	{
		fprintf(stderr, "webhook-receiver: invalid value for tls-key: cannot load \"%s\" or it does not match tls-cert\n",
				cfg.tls_key);
		goto err;
	}
	return ctx;
err:
	if (ctx)
		SSL_CTX_free(ctx);
	return NULL;
}

int
main(int argc, char **argv)
{
	SSL_CTX    *tls = NULL;
	struct event_config *evcfg = NULL;
	struct event *sigterm = NULL;
	struct event *sigint = NULL;
	struct event *sighup = NULL;
	struct event *deadline = NULL;
	int			rc = 1;
	int			r;

	r = rcv_config_load(&cfg, argc, argv);
	if (r != 0)
	{
		rcv_config_free(&cfg);
		return r > 0 ? 0 : 2;
	}
	rcv_log_min_level = (rcv_log_level) cfg.log_level;
	hide_db_password(argc, argv);
	signal(SIGPIPE, SIG_IGN);

	if (cfg.tls_cert && (tls = make_tls()) == NULL)
	{
		rc = 2;
		goto err;
	}
	/*
	 * With the changelist, an event that evhttp disables and enables again
	 * within one loop iteration (every request turns its connection from
	 * reading to writing and back) costs no epoll_ctl() call.
	 */
	if ((evcfg = event_config_new()) == NULL ||
		event_config_set_flag(evcfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST) != 0)
		goto err;
	base = event_base_new_with_config(evcfg);
	if (base == NULL)
		goto err;
	deadline = evtimer_new(base, on_drain_deadline, NULL);
	sigterm = evsignal_new(base, SIGTERM, on_stop_signal, deadline);
	sigint = evsignal_new(base, SIGINT, on_stop_signal, deadline);
	sighup = evsignal_new(base, SIGHUP, on_hup, NULL);
	if (!deadline || !sigterm || !sigint || !sighup ||
		event_add(sigterm, NULL) || event_add(sigint, NULL) || event_add(sighup, NULL))
		goto err;
	if (rcv_http_start(base, &cfg, tls) != 0)
		goto err;
	if (rcv_batch_init(base, &cfg, rcv_http_complete, rcv_http_connections) != 0)
		goto err;
	if (cfg.test_now)
		rcv_log(RCV_LOG_WARNING, "test-now is set: timestamps are checked against a fixed clock");

	event_base_dispatch(base);
	rc = 0;
err:
	rcv_http_free();
	rcv_batch_free();
	rcv_sources_install(NULL);
	rcv_metrics_reset();
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	if (sighup)
		event_free(sighup);
	if (deadline)
		event_free(deadline);
	if (base)
		event_base_free(base);
	if (evcfg)
		event_config_free(evcfg);
	if (tls)
		SSL_CTX_free(tls);
	rcv_config_free(&cfg);
	return rc;
}
