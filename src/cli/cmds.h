/* SPDX-License-Identifier: MIT */
/* The commands (src/cli/cmd_*.c), their options structs and their pure argument parsers. */
#ifndef EPROF_CMDS_H
#define EPROF_CMDS_H

#include <stdbool.h>
#include <stdio.h>

#include "analysis/hot.h"
#include "cli/command.h"
#include "cli/filter.h"
#include "output/report.h"
#include "record/record.h"
#include "tui/top_model.h"

extern const struct command cmd_record, cmd_report, cmd_flamegraph, cmd_trace, cmd_export,
	cmd_diff, cmd_top, cmd_critical_path, cmd_cache;

/* record's options that top shares, over a struct record_opts: targets, and sampling. */
extern const struct opt record_target_opts[], record_sampling_opts[];

struct report_cli {
	struct report_opts r;
	struct job_inputs more; /* FILE... DIR GLOB: a job's recordings */
	const char *input;
	const char *output;
	const char *region; /* --region NAME: samples inside that region only */
	int view;	    /* --view: enum stack_view (analysis/view.h) */
};

enum fg_weights {
	FG_CPU = 0,	      /* CPU samples */
	FG_OFFCPU = 1,	      /* --offcpu: blocked ns */
	FG_WALL = 2,	      /* --wall: CPU ns + blocked ns */
	FG_CRITICAL_PATH = 3, /* --critical-path: ns on the critical path */
	FG_GPU = 4,	      /* --gpu: GPU ns on the CPU stacks that launched the work */
	FG_CUDA_API = 5,      /* --cuda-api: ns in CUDA API calls on their calling stacks */
	FG_MEM = 6,	      /* --mem: bytes allocated by allocating stack */
	FG_MEM_PEAK = 7,      /* --mem-peak: bytes live at the heap's peak */
	FG_LEAKS = 8,	      /* --leaks: bytes not freed by the end */
	FG_WAKERS = 9,	      /* --wakers: blocked ns on the stacks of the threads that woke them */
	FG_IO = 10,	      /* --io: bytes read and written by calling stack and file */
	FG_IO_TIME = 11,      /* --io-time: ns in I/O calls by calling stack and file */
};

static inline bool fg_is_mem(enum fg_weights w)
{
	return w == FG_MEM || w == FG_MEM_PEAK || w == FG_LEAKS;
}

struct flamegraph_cli {
	struct job_inputs more; /* FILE... DIR GLOB: a job's recordings, merged */
	const char *input, *output, *title;
	struct sample_filter filter;
	bool folded, lines, inverted, weight_ns, no_comm;
	unsigned width;
	enum fg_weights weights;
	const char *region; /* --region NAME: samples inside that region only */
	bool gil_colors;    /* --gil: open coloured by the GIL share */
	uint8_t gil;	    /* --gil=held|not-held: enum gil_filter (analysis/stacks.h) */
	int view;	    /* --view: enum stack_view (analysis/view.h) */
};

struct trace_cli {
	struct job_inputs more; /* FILE... DIR GLOB: a job's recordings on one timeline */
	const char *input, *output;
	struct sample_filter filter;
	struct time_range range;
	bool no_counters;
	int view; /* --view: enum stack_view (analysis/view.h) */
};

enum export_format {
	EXPORT_NONE = 0,
	EXPORT_PPROF,
	EXPORT_FOLDED,
	EXPORT_JSON,
	EXPORT_CSV,
	EXPORT_HTML,
};

struct export_cli {
	const char *input, *output;
	enum export_format format;
	struct sample_filter filter;
	struct time_range range;
	bool lines;
	const char *diff_base; /* --diff BASE: the HTML page of eprof diff BASE FILE */
	int view;	       /* --view: enum stack_view (analysis/view.h) */
};

#define DIFF_MAX_GATES 64
struct diff_cli {
	const char *base, *new;
	const char *output;	    /* table or JSON, default stdout */
	const char *flamegraph_out; /* --flamegraph -o FILE */
	bool flamegraph, json, has_fail;
	bool inlined;		    /* count inlined functions on their own */
	double fail_above;	    /* percent */
	double min_share;	    /* percent of samples below which functions are not gated */
	unsigned limit;
	unsigned paths;		    /* rows of the call-path table */
	int sort;		    /* enum diff_sort */
	const char *per;	    /* --per REGION */
	int rank;		    /* --rank N: two jobs' runs compared on rank N only (-1 all) */
	const char *gates[DIFF_MAX_GATES]; /* --gate EXPR (diff_gate.h) */
	size_t ngates;
	int view; /* --view: enum stack_view (analysis/view.h) */
};

/*
 * The commands' parsers, as cmd_main() runs them (cmd_parse), for the unit tests: 0, 1 for
 * --help, -EINVAL on a bad argument (message printed).
 */
int parse_record_args(int argc, char **argv, struct record_opts *o);
int parse_report_args(int argc, char **argv, struct report_cli *o);
int parse_flamegraph_args(int argc, char **argv, struct flamegraph_cli *o);
int parse_trace_args(int argc, char **argv, struct trace_cli *o);
int parse_export_args(int argc, char **argv, struct export_cli *o);
int parse_diff_args(int argc, char **argv, struct diff_cli *o);

struct top_cli {
	struct record_opts rec; /* targets, -F, -g, --no-kernel, -v; rec.live is set */
	double delay;		/* seconds between refreshes */
	unsigned iterations;	/* -n: snapshots before exiting, 0 = until stopped */
	bool batch;
	bool gpu; /* --gpu: CUDA tables (rec.cuda on) */
	enum top_sort sort;
	int view; /* --view: enum stack_view (analysis/view.h) */
};
int parse_top_args(int argc, char **argv, struct top_cli *o);

struct critpath_cli {
	struct job_inputs more; /* FILE... DIR GLOB: the path across a job's ranks */
	const char *input, *output;
	bool json, segments;
	unsigned limit;	  /* rows of functions, 0 = all */
	uint32_t pid, tid; /* end thread (default: the launched command's main thread) */
	double end_s;	  /* end, seconds from the start (0 = the default end) */
	const char *region; /* --region NAME: the path of one instance of that region */
	long instance;	    /* --instance N (0 the first, -1 the last; default 0) */
};
int parse_critpath_args(int argc, char **argv, struct critpath_cli *o);

#endif
