/*
 * cli.c
 *		webhook-sim's command-line conventions that every command shares:
 *		one-line usage errors and the exit code that goes with them.
 *
 * The commands (serve.c, replay.c, verify.c) call these; they call nothing
 * of the commands, so calls run one way: sim_main.c to the commands, the
 * commands to here.  Declared in commands.h.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>

#include "commands.h"

/* Print "webhook-sim CMD: <message> (try …)" as one line; EXIT_USAGE. */
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

/*
 * getopt_long's failure (opt is ':' for a missing value, else '?') on the
 * argument it was reading, argv[optind - 1], as one usage error.
 */
int
option_error(const char *cmd, int argc, char **argv, int opt)
{
	const char *arg = (optind - 1 < argc && optind >= 1) ? argv[optind - 1] : "?";

	if (opt == ':')
		return usage_error(cmd, "option %s needs a value", arg);
	return usage_error(cmd, "unknown option %s", arg);
}
