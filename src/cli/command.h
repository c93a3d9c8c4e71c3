/* SPDX-License-Identifier: MIT */
/*
 * A command: its options table and hooks. cmd_main() does what every command does around
 * its own work, in one place: parse, --help, open the input profiles, run, close the output
 * (a write error is an error), free, and the exit status (0 ok, 1 failed, 2 usage error).
 */
#ifndef EPROF_CLI_COMMAND_H
#define EPROF_CLI_COMMAND_H

#include <stdbool.h>
#include <stddef.h>

#include "options.h"

struct profile;
struct sink;

#define CMD_MAX_INPUTS 2

enum cmd_flags {
	CMD_NEEDS_ROOT = 1 << 0, /* BPF and perf events: checked once in main() */
	CMD_IN_ORDER = 1 << 1,	 /* options stop at the first non-option (record -- CMD -x) */
	CMD_OUTPUT = 1 << 2,	 /* .output is the field with the output path ("-": stdout) */
	CMD_JOB = 1 << 3,	 /* several recordings of one job: files, globs, directories */
	CMD_JOB_MERGE = 1 << 4,	 /* ... merged into in[0], on one clock, processes named by rank */
	CMD_JOB_RANK_ROOT = 1 << 5, /* ... and every thread named "HOST/rank N" (a flamegraph root) */
	CMD_JOB_PAIR = 1 << 6,	 /* two inputs, each a recording or a job's (directory, glob) */
	CMD_VIEW = 1 << 7,	 /* .view: the offset of an int, the --view its inputs are put in */
};

/* --view python|mixed|native (st.field: an int, enum stack_view of analysis/view.h). */
extern const struct opt_choice cmd_view_choices[];
#define OPT_VIEW(st, field)                                                                        \
	OPT_CHOICE("view", 0, st, field, cmd_view_choices,                                         \
		   "stacks as Python frames and the native leaf, all frames\n"                    \
		   "(default) or native frames only (docs/python.md)")

/* CMD_JOB_PAIR: one input's recordings when it has more than one (in[i] is then NULL). */
struct job_side {
	struct profile **profs;
	char **paths;
	size_t n;
};

/* The recordings of a job, for a CMD_JOB command given more than one (or a directory). */
struct job_inputs {
	char **pos; /* positional arguments after the first input */
	int npos;
	int rank;	  /* --rank N: only that rank's recording (-1: all) */
	const char *host; /* --host H: only that host's */
};

/* --rank and --host of a CMD_JOB_MERGE command (st.field: its struct job_inputs). */
#define OPT_JOB_SELECT(st, field)                                                                  \
	OPT_INT("rank", 0, "N", st, field.rank, 0, 1 << 30,                                        \
		"several recordings: only rank N's"),                                              \
	    OPT_STRING("host", 0, "HOST", st, field.host, "several recordings: only HOST's")

struct cmd_ctx {
	const struct command *cmd;
	void *opts;			      /* the command's options struct, parsed */
	struct profile *in[CMD_MAX_INPUTS];   /* the inputs, opened */
	/* CMD_JOB given several recordings: all of them (in[0] is then NULL), and their paths */
	struct profile **job;
	char **job_paths;
	size_t njob; /* with CMD_JOB_MERGE, in[0] is their merge */
	struct job_side side[CMD_MAX_INPUTS]; /* CMD_JOB_PAIR */
	const char *out_path;		      /* CMD_OUTPUT */
	struct sink *out;		      /* once cmd_output() opened it */
	bool text_out; /* set before cmd_output(): text for people, control bytes escaped */
	void *state;			      /* the command's, from run to after */
	void (*state_free)(void *state);
};

struct command {
	const char *name;
	const char *summary; /* its line in eprof --help */
	const char *usage;   /* what follows "usage: eprof NAME " */
	const char *about;   /* text between the usage line and the options, or NULL */
	const char *footer;  /* text after the options, or NULL */
	const struct opt *opts;
	const void *defaults; /* the options struct before parsing */
	size_t opts_size;
	unsigned flags;
	/* Profiles to open: 1 (optional argument, the default from .defaults) or exactly 2. */
	int ninputs;
	size_t input[CMD_MAX_INPUTS]; /* offsets of their paths (const char *) */
	size_t output;		      /* with CMD_OUTPUT: the offset of the output path */
	size_t job_inputs;	      /* with CMD_JOB: the offset of a struct job_inputs */
	size_t view;		      /* with CMD_VIEW: the offset of the --view int */
	/*
	 * After the options and inputs: the other positional arguments (pos[0..npos), none
	 * allowed unless finish takes them), defaults that depend on other options, and
	 * combinations. Pure, like the parsing. 0 or -EINVAL (logged).
	 */
	int (*finish)(void *opts, int npos, char **pos);
	/*
	 * The work. Returns 0, an exit status above 0 (its messages logged), or -errno when
	 * writing the output failed (cmd_main says so).
	 */
	int (*run)(struct cmd_ctx *c);
	/* After the output closed cleanly: what is said about it; returns as run does. */
	int (*after)(struct cmd_ctx *c);
};

/* The table and the defaults (a const object of the command's options struct). */
#define CMD_OPTIONS(table, dflt) .opts = table, .defaults = &(dflt), .opts_size = sizeof(dflt)
/* A reader command: one profile (FILE, the default from the defaults), -o in .output. */
#define CMD_READER(st)                                                                             \
	.flags = CMD_OUTPUT, .ninputs = 1, .input = { offsetof(st, input) },                       \
	.output = offsetof(st, output)

/* A reader command that also takes several recordings of a job (field: a struct job_inputs). */
#define CMD_JOB_READER(st, field, more_flags)                                                      \
	.flags = CMD_OUTPUT | CMD_JOB | (more_flags), .ninputs = 1, .input = { offsetof(st, input) },             \
	.output = offsetof(st, output), .job_inputs = offsetof(st, field)
/* Fills opts (cmd->opts_size bytes) from argv[1..]: 0, 1 for --help, -EINVAL (logged). */
int cmd_parse(const struct command *cmd, int argc, char **argv, void *opts);
/* The usage line, the about text, one line per option, the footer. */
int cmd_help(const struct command *cmd, struct sink *out);
/* argv[0] is the command's name. Returns the process exit status. */
int cmd_main(const struct command *cmd, int argc, char **argv);
/*
 * The output (-o, default stdout), opened at the first call: a command opens it once it is
 * about to write, so a failure before leaves an existing file alone. NULL (logged) when it
 * cannot be opened. cmd_main closes it.
 */
struct sink *cmd_output(struct cmd_ctx *c);

#endif
