/*
 * config.h
 *		Receiver settings: command-line flags and an optional config file.
 */
#ifndef RCV_CONFIG_H
#define RCV_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <time.h>

/* The most batches --db-pipeline lets one database connection carry at once. */
#define RCV_PIPELINE_MAX 8

typedef struct rcv_config
{
	char	   *db;				/* libpq connection string */
	int			db_from_flag;	/* db came from the command line (ps shows it) */
	char	   *listen_host;
	int			listen_port;
	char	   *admin_host;		/* NULL: no admin listener (--admin-listen off) */
	int			admin_port;
	char	   *tls_cert;
	char	   *tls_key;
	long		max_body;		/* bytes */
	long		max_header;		/* bytes */
	long		read_timeout_ms;
	long		max_connections;
	long		max_per_address;	/* connections from one address (0: no cap) */
	long		max_buffered;	/* bytes of unanswered requests, all clients */
	long		batch_size;
	long		batch_delay_ms;
	long		commit_timeout_ms;
	long		db_connections;
	long		db_pipeline;	/* batches in flight per connection */
	long		retry_after;	/* seconds, in 503 answers */
	int			log_level;
	long		test_now;		/* tests only: fixed clock for timestamps */
} rcv_config;

/*
 * Parse argv (and the file named by --config) into cfg.  Returns 0, 1 when
 * --help was printed, or -1 after printing a one-line error naming the
 * setting to stderr (the caller exits with status 2).
 */
extern int	rcv_config_load(rcv_config *cfg, int argc, char **argv);
extern void rcv_config_free(rcv_config *cfg);
extern void rcv_config_usage(FILE *out);

/* Does the libpq connection string carry a password?  (Never says which.) */
extern int	rcv_conninfo_has_password(const char *conninfo);

#endif							/* RCV_CONFIG_H */
