/*
 * sim_main.c
 *		webhook-sim: a stateful fake webhook provider for tests, demos and
 *		benchmarks.  Dispatches to the serve, replay and verify commands.
 *
 * The commands are one table that both the dispatch and the help read, so
 * a command added to it is listed in --help and in the usage errors too.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"

typedef struct sim_command
{
	const char *name;
	int			(*run) (int argc, char **argv);
	const char *synopsis;		/* its arguments, after the name */
	const char *help;			/* one line: what it does */
} sim_command;

static const sim_command commands[] = {
	{"serve", cmd_serve, "--listen HOST:PORT [options]",
	"run the provider (read API + chaotic delivery)"},
	{"replay", cmd_replay, "--file F --mode M --to URL ...",
	"re-send a recorded stream"},
	{"verify", cmd_verify, "--db CONNINFO --source NAME --api URL",
	"compare the database mirror with the truth"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The column the one-line help of each command starts in. */
#define HELP_COLUMN 53

/*
 * One line a command: its name and synopsis, then its help in a column of
 * its own; a synopsis that reaches into that column puts the help on the
 * next line.
 */
static void
print_help(void)
{
	int			name_width = 0;

	for (size_t i = 0; i < N_COMMANDS; i++)
		if ((int) strlen(commands[i].name) > name_width)
			name_width = (int) strlen(commands[i].name);

	puts("webhook-sim: a stateful fake webhook provider\n\nUsage:");
	for (size_t i = 0; i < N_COMMANDS; i++)
	{
		const sim_command *c = &commands[i];
		int			n = printf("  webhook-sim %-*s %s", name_width, c->name, c->synopsis);

		if (n + 2 <= HELP_COLUMN)
			printf("%*s%s\n", HELP_COLUMN - n, "", c->help);
		else
			printf("\n%*s%s\n", HELP_COLUMN, "", c->help);
	}
	puts("\nRun 'webhook-sim COMMAND --help' for the options of each command.");
}

/* The table's names as "a, b or c", for the missing-command error. */
static void
print_names(FILE *out)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, "%s%s", i == 0 ? "" : i + 1 == N_COMMANDS ? " or " : ", ",
				commands[i].name);
}

int
main(int argc, char **argv)
{
	/* a peer closing a connection must not kill the process */
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (argc < 2)
	{
		fprintf(stderr, "webhook-sim: missing command (");
		print_names(stderr);
		fprintf(stderr, "; try 'webhook-sim --help')\n");
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
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "webhook-sim: unknown command \"%s\" (try 'webhook-sim --help')\n", argv[1]);
	return EXIT_USAGE;
}
