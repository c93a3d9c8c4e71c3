// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "record/python.h"
#include "record/record.h"
#include "util/log.h"

/* -p PID[,PID..]: into a struct record_opts. */
static int opt_pids(const struct opt *opt, const char *arg, void *field)
{
	struct record_opts *o = field;
	char *copy = strdup(arg), *save = NULL, *tok, *end;
	int err = 0;

	if (!copy) {
		log_err("out of memory");
		return -ENOMEM;
	}
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned long long v;

		errno = 0;
		v = strtoull(tok, &end, 10);
		if (errno || end == tok || *end || *tok == '-' || v == 0 || v > 0x7fffffff) {
			log_err("invalid PID '%s'", tok);
			err = -EINVAL;
			break;
		}
		if (o->npids == RECORD_MAX_PIDS) {
			log_err("too many PIDs (at most %d)", RECORD_MAX_PIDS);
			err = -EINVAL;
			break;
		}
		o->pids[o->npids++] = v;
	}
	free(copy);
	if (!err && !o->npids) {
		log_err("-p needs at least one PID");
		err = -EINVAL;
	}
	return err;
}

/* What to sample: shared with eprof top. */
const struct opt record_target_opts[] = {
	OPT_FUNC("pid", 'p', "PID[,PID]", opt_pids,
		 "processes: all their threads, their descendants running\n"
		 "now and the children they fork later"),
	OPT_FLAG("no-children", 0, struct record_opts, no_children,
		 "no children: only the listed PIDs (or record's launched command)"),
	OPT_FLAG("all-cpus", 'a', struct record_opts, all, "the whole system"),
	OPT_END,
};

static const struct opt_choice callgraphs[] = {
	{ "auto", CG_AUTO }, { "fp", CG_FP }, { "dwarf", CG_DWARF }, { NULL }
};

/* How to sample: shared with eprof top. */
const struct opt record_sampling_opts[] = {
	OPT_UINT("freq", 'F', "HZ", struct record_opts, freq, 1, 100000,
		 "samples per second per CPU (default 99, max 100000)"),
	OPT_CHOICE("call-graph", 'g', struct record_opts, callgraph, callgraphs,
		   "how stacks are walked: auto (the default) and dwarf unwind\n"
		   "a copy of the user stack with DWARF CFI, fp follows frame pointers"),
	OPT_FLAG("no-kernel", 0, struct record_opts, no_kernel, "user stacks only"),
	OPT_FLAG("no-python", 0, struct record_opts, no_python,
		 "no Python frames (CPython 3.10-3.13 targets get them by default)"),
	OPT_COUNT("verbose", 'v', struct record_opts, verbose, "more messages (repeat for debug)"),
	OPT_END,
};

/* Checks the shape only; binaries and symbols are resolved when the record starts. */
static int check_region(const struct opt *opt, const char *arg)
{
	const char *c = strchr(arg, ':');
	struct py_rcand cands[PY_RCAND_MAX];
	int r;

	if (!c || c == arg || !c[1]) {
		log_err("invalid --region '%s': use BIN:SYMBOL or BIN:0xADDR", arg);
		return -EINVAL;
	}
	if (strncmp(arg, PY_REGION_PREFIX, strlen(PY_REGION_PREFIX)))
		return 0;
	r = py_region_cands(arg + strlen(PY_REGION_PREFIX), 0, 0, cands, PY_RCAND_MAX);
	if (r >= 0)
		return 0;
	log_err(r == -E2BIG ? "invalid --region '%s': name too long (at most %d characters a "
			      "part, %d dots)"
			    : "invalid --region '%s': use py:QUALNAME or py:MODULE.QUALNAME (e.g. "
			      "py:Trainer.step, py:train.main)",
		arg, PY_RNAME - 4, PY_RCAND_MAX - 1);
	return -EINVAL;
}

static int check_usdt(const struct opt *opt, const char *arg)
{
	const char *c1 = strchr(arg, ':'), *c2 = strrchr(arg, ':');

	if (!c1 || c1 == arg || !c1[1] || c2 == c1 || c2[-1] == ':' || !c2[1]) {
		log_err("invalid --usdt '%s': use BIN:PROVIDER:NAME", arg);
		return -EINVAL;
	}
	return 0;
}

/* Resource metrics (src/record/metrics.c): on by default. */
static const struct opt record_metrics_opts[] = {
	OPT_FLAG("no-metrics", 0, struct record_opts, no_metrics,
		 "no resource metrics (CPU, RSS, faults, I/O, network, energy,\n"
		 "GPU devices: docs/metrics.md)"),
	OPT_UINT("metrics-interval", 0, "MS", struct record_opts, metrics_interval_ms, 50, 60000,
		 "resource metrics read every MS milliseconds (default 100)"),
	OPT_END,
};

#define R struct record_opts

static const struct opt record_opts[] = {
	OPT_INCLUDE(record_target_opts),
	OPT_DOUBLE("duration", 'd', "SECONDS", R, duration, 0, 1e7,
		   "stop after this long (a launched command then gets SIGTERM)", .above = true,
		   .expect = "seconds > 0"),
	OPT_STRING("output", 'o', "FILE", R, output,
		   "output file (default eprof.data, written 0600)"),
	OPT_STRING("user", 'u', "USER", R, user,
		   "run the command as USER (name or uid), with its groups;\n"
		   "default: as eprof runs (root under sudo)"),
	OPT_INCLUDE(record_sampling_opts),
	OPT_UINT("stack-size", 0, "BYTES", R, snapshot_bytes, 512, EPROF_MAX_SNAPSHOT,
		 "user stack copied per sample for DWARF unwinding\n"
		 "(default 32768, max 65536)"),
	OPT_UINT("ringbuf-mb", 0, "MB", R, ringbuf_mb, 1, 4096, "ring buffer size (default 16)"),
	OPT_FLAG("offcpu", 0, R, offcpu,
		 "also record blocked intervals (off-CPU stacks) and wakeups"),
	OPT_UINT("offcpu-min-us", 0, "N", R, offcpu_min_us, 0, 10000000,
		 "shortest blocked interval recorded (default 10)", OPT_ALSO(R, offcpu)),
	OPT_UINT("offcpu-sample-us", 0, "N", R, offcpu_sample_us, 0, 10000000,
		 "stacks for blocked time sampled with mean N us (default 1000,\n"
		 "0 = every interval): a wait of d us has them with probability\n"
		 "1-e^(-d/N) and stands for d over that; all keep times and wakers",
		 OPT_ALSO(R, offcpu)),
	OPT_UINT("offcpu-stack-rate", 0, "N", R, offcpu_stack_rate, 0, 10000000,
		 "stack captures per second and CPU at most (default 2000,\n"
		 "0 = no cap); intervals beyond keep their times and wakers",
		 OPT_ALSO(R, offcpu)),
	OPT_SET("cuda", 0, R, cuda, 1,
		"trace CUDA API calls and (with CUPTI) GPU activity\n"
		"(default: on when the target maps a CUDA library)"),
	OPT_SET("no-cuda", 0, R, cuda, 0, "no CUDA tracing"),
	OPT_FLAG("no-inject", 0, R, no_inject,
		 "-p, -a: do not inject the CUPTI collector into running CUDA\n"
		 "processes (CUDA API calls only, no GPU kernel timing)"),
	OPT_UINT("cuda-stack-rate", 0, "N", R, cuda_stack_rate, 0, 1000000,
		 "launches per second per thread recorded with a stack\n"
		 "(default 100, 0 none)"),
	OPT_LIST("region", 0, "BIN:SYMBOL", R, regions, nregions,
		 "time each call of a function (also BIN:0xADDR; BIN a path or a\n"
		 "library name such as libfoo); py:FUNC times each call of a Python\n"
		 "function (py:Trainer.step, py:train.main = main in train.py), by\n"
		 "sampling (docs/python.md); repeatable",
		 .check = check_region),
	OPT_LIST("usdt", 0, "BIN:PROVIDER:NAME", R, usdts, nusdts,
		 "regions from USDT probes NAME__begin/NAME__end or\n"
		 "NAME_start/NAME_end; repeatable",
		 .check = check_usdt),
	OPT_FLAG("no-auto-regions", 0, R, no_auto_regions,
		 "do not pick up EPROF_REGION_* (eprof/region.h) and NVTX ranges"),
	OPT_UINT("mem", 0, "BYTES", R, mem_sample, 1, 1ull << 40,
		 "allocations, frees and RSS: one sample per BYTES allocated\n"
		 "on average (default 524288); --mem=1 records every allocation\n"
		 "(and uses a ring buffer of at least 64 MB)",
		 .optional = true, .val = 512 * 1024,
		 .expect = "a mean of 1 (every allocation) or more bytes"),
	OPT_INCLUDE(record_metrics_opts),
	OPT_FLAG("io", 0, R, io,
		 "bytes and time of every read, write, send and receive by\n"
		 "calling stack, with the file or peer (docs/io.md)"),
	OPT_UINT("io-stack-rate", 0, "N", R, io_stack_rate, 0, 10000000,
		 "I/O calls per second and CPU recorded with a stack (default\n"
		 "5000, 0 = no cap); calls beyond keep their bytes, time and file",
		 OPT_ALSO(R, io)),
	OPT_FLAG("quiet", 'q', R, quiet, "no status line or summary"),
	OPT_FLAG("no-cache", 0, R, no_cache,
		 "neither read nor write the build-id cache of symbol tables\n"
		 "(also EPROF_CACHE=0; docs/cache.md)"),
	OPT_END,
};

static const struct record_opts record_defaults = {
	.freq = 99,
	.output = "eprof.data",
	.snapshot_bytes = 32768,
	.ringbuf_mb = 16,
	.offcpu_min_us = 10,
	.offcpu_stack_rate = 2000,
	.offcpu_sample_us = 1000,
	.cuda = -1,
	.cuda_stack_rate = 100,
	.io_stack_rate = 5000,
};

/* --user USER: a name, or a uid; only with a command to launch. */
static int resolve_user(struct record_opts *o)
{
	struct passwd *pw = getpwnam(o->user);
	char *end;

	if (!o->argv) {
		log_err("record: --user runs the launched command as USER: give -- CMD ARGS");
		return -EINVAL;
	}
	if (!pw) {
		unsigned long uid = strtoul(o->user, &end, 10);

		pw = *o->user && !*end ? getpwuid((uid_t)uid) : NULL;
	}
	if (!pw) {
		log_err("failed to find user '%s': no such user", o->user);
		return -EINVAL;
	}
	o->run_as = true;
	o->run_uid = pw->pw_uid;
	o->run_gid = pw->pw_gid;
	return 0;
}

/* The command to launch is what follows the options ("+": its own flags stay its own). */
static int record_finish(void *opts, int npos, char **pos)
{
	struct record_opts *o = opts;
	int modes;

	if (npos)
		o->argv = pos;
	modes = (o->npids > 0) + o->all + (o->argv != NULL);
	if (modes != 1) {
		log_err(modes ? "record: choose one of -p PID, -a, or -- CMD"
			      : "record: nothing to profile: give -p PID, -a, or -- CMD ARGS");
		return -EINVAL;
	}
	if (o->all && o->no_children) {
		log_err("record: --no-children limits -p PID or a command; -a records every "
			"process");
		return -EINVAL;
	}
	if (o->all && !o->duration)
		log_info("recording the whole system until Ctrl-C");
	return o->user ? resolve_user(o) : 0;
}

static int record_main(struct cmd_ctx *c)
{
	return record_run(c->opts);
}

const struct command cmd_record = {
	.name = "record",
	.summary = "sample CPU stacks of a command, processes or the system",
	.usage = "[-p PID[,PID..] | -a | -- CMD ARGS] [options]",
	CMD_OPTIONS(record_opts, record_defaults),
	.flags = CMD_NEEDS_ROOT | CMD_IN_ORDER,
	.finish = record_finish,
	.run = record_main,
};

int parse_record_args(int argc, char **argv, struct record_opts *o)
{
	return cmd_parse(&cmd_record, argc, argv, o);
}
