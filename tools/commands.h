/*
 * commands.h
 *		Entry points of the webhook-sim subcommands and their shared
 *		command-line conventions.
 *
 * Each command returns the process exit code: 0 success, 1 a failed check
 * (verify found differences, replay saw non-2xx answers, serve hit a fatal
 * runtime error), 2 bad usage.  Bad usage prints one line to stderr.
 */
#ifndef SIM_COMMANDS_H
#define SIM_COMMANDS_H

#define EXIT_USAGE 2

extern int	cmd_serve(int argc, char **argv);
extern int	cmd_replay(int argc, char **argv);
extern int	cmd_verify(int argc, char **argv);

/*
 * cli.c: print "webhook-sim CMD: <message>" as one line and return
 * EXIT_USAGE.
 */
extern int	usage_error(const char *cmd, const char *fmt,...) __attribute__((format(printf, 2, 3)));

/* cli.c: one-line message for getopt_long's failure on argv[optind - 1]. */
extern int	option_error(const char *cmd, int argc, char **argv, int opt);

#endif							/* SIM_COMMANDS_H */
