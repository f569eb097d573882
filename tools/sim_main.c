/*
 * sim_main.c
 *		webhook-sim: a stateful fake webhook provider for tests, demos and
 *		benchmarks.  Dispatches to the serve, replay and verify commands.
 */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"

static void
print_help(void)
{
	puts("webhook-sim: a stateful fake webhook provider\n"
		 "\n"
		 "Usage:\n"
		 "  webhook-sim serve  --listen HOST:PORT [options]    run the provider (read API + chaotic delivery)\n"
		 "  webhook-sim replay --file F --mode M --to URL ...  re-send a recorded stream\n"
		 "  webhook-sim verify --db CONNINFO --source NAME --api URL\n"
		 "                                                     compare the database mirror with the truth\n"
		 "\n"
		 "Run 'webhook-sim COMMAND --help' for the options of each command.");
}

int
usage_error(const char *cmd, const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "webhook-sim %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (try 'webhook-sim %s --help')\n", cmd);
	return EXIT_USAGE;
}

int
option_error(const char *cmd, int argc, char **argv, int opt)
{
	const char *arg = (optind - 1 < argc && optind >= 1) ? argv[optind - 1] : "?";

	if (opt == ':')
		return usage_error(cmd, "option %s needs a value", arg);
	return usage_error(cmd, "unknown option %s", arg);
}

int
main(int argc, char **argv)
{
	/* a peer closing a connection must not kill the process */
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (argc < 2)
	{
		fprintf(stderr, "webhook-sim: missing command (serve, replay or verify; try 'webhook-sim --help')\n");
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
		strcmp(argv[1], "help") == 0)
	{
		print_help();
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0)
	{
		printf("webhook-sim %s\n", SIM_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "serve") == 0)
		return cmd_serve(argc - 1, argv + 1);
	if (strcmp(argv[1], "replay") == 0)
		return cmd_replay(argc - 1, argv + 1);
	if (strcmp(argv[1], "verify") == 0)
		return cmd_verify(argc - 1, argv + 1);
	fprintf(stderr, "webhook-sim: unknown command \"%s\" (try 'webhook-sim --help')\n", argv[1]);
	return EXIT_USAGE;
}
