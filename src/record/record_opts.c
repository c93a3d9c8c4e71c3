// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "eprof_abi.h"
#include "../util/log.h"
#include "python.h"
#include "record.h"

void record_usage(FILE *f)
{
	fprintf(f,
		"usage: eprof record [-p PID[,PID..] | -a | -- CMD ARGS] [options]\n"
		"  -p, --pid PID[,PID]     attach to running processes: all their threads, their descendants\n"
		"                          running now and the children they fork later\n"
		"      --no-children       only the listed PIDs (or the launched command), no children\n"
		"  -a, --all-cpus          the whole system\n"
		"  -F, --freq HZ           samples per second per CPU (default 99, max 100000)\n"
		"  -d, --duration SECONDS  stop after this long (a launched command then gets SIGTERM)\n"
		"  -o, --output FILE       output file (default eprof.data, written 0600)\n"
		"  -g, --call-graph MODE   auto (default: complete stacks from DWARF CFI), fp, dwarf\n"
		"      --stack-size BYTES  user stack copied per sample for DWARF unwinding (default 32768, max 65536)\n"
		"      --ringbuf-mb MB     ring buffer size (default 16)\n"
		"      --no-kernel         user stacks only\n"
		"      --offcpu            also record blocked intervals (off-CPU stacks) and wakeups\n"
		"      --offcpu-min-us N   shortest blocked interval recorded (default 10)\n"
		"      --offcpu-sample-us N  stacks for blocked time sampled with mean N us (default 1000,\n"
		"                          0 = every interval): a wait of d us has them with probability\n"
		"                          1-e^(-d/N) and stands for d over that; all keep times and wakers\n"
		"      --offcpu-stack-rate N  stack captures per second and CPU at most (default 2000,\n"
		"                          0 = no cap); intervals beyond keep their times and wakers\n"
		"      --cuda, --no-cuda   trace CUDA API calls and (with CUPTI) GPU activity\n"
		"                          (default: on when the target maps a CUDA library)\n"
		"      --no-inject         -p, -a: do not inject the CUPTI collector into running CUDA\n"
		"                          processes (CUDA API calls only, no GPU kernel timing)\n"
		"      --cuda-stack-rate N launches per second per thread recorded with a stack (default 100, 0 none)\n"
		"      --region BIN:SYMBOL time each call of a function (also BIN:0xADDR; BIN a path or a\n"
		"                          library name such as libfoo); repeatable\n"
		"      --region py:FUNC    time each call of a Python function (py:Trainer.step,\n"
		"                          py:train.main = main in train.py), by sampling; docs/python.md\n"
		"      --usdt BIN:PROVIDER:NAME  regions from USDT probes NAME__begin/NAME__end or\n"
		"                          NAME_start/NAME_end; repeatable\n"
		"      --no-auto-regions   do not pick up EPROF_REGION_* (eprof/region.h) and NVTX ranges\n"
		"      --no-python         no Python frames (CPython 3.11+ targets get them by default)\n"
		"      --mem[=BYTES]       allocations, frees and RSS: one sample per BYTES allocated\n"
		"                          on average (default 524288); --mem=1 records every allocation\n"
		"                          (and uses a ring buffer of at least 64 MB)\n"
		"  -q, --quiet             no status line or summary\n"
		"  -v, --verbose           more messages (repeat for debug)\n");
}

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || *out > max)
		return -EINVAL;
	return 0;
}

static int parse_pids(const char *arg, struct record_opts *o)
{
	char *copy = strdup(arg), *save = NULL, *tok;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned long long v;

		if (parse_uint(tok, 0x7fffffff, &v) || v == 0) {
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

static int parse_callgraph(const char *arg, struct record_opts *o)
{
	if (!strcmp(arg, "auto"))
		o->callgraph = CG_AUTO;
	else if (!strcmp(arg, "fp"))
		o->callgraph = CG_FP;
	else if (!strcmp(arg, "dwarf"))
		o->callgraph = CG_DWARF;
	else {
		log_err("invalid --call-graph '%s': use auto, fp or dwarf", arg);
		return -EINVAL;
	}
	return 0;
}

enum {
	OPT_STACK_SIZE = 256, OPT_RINGBUF, OPT_NO_KERNEL, OPT_OFFCPU, OPT_OFFCPU_MIN, OPT_OFFCPU_RATE,
	OPT_OFFCPU_SAMPLE,
	OPT_CUDA, OPT_NO_CUDA, OPT_CUDA_RATE, OPT_REGION, OPT_USDT, OPT_NO_AUTO_REGIONS, OPT_NO_PYTHON,
	OPT_MEM, OPT_NO_CHILDREN, OPT_NO_INJECT
};

/* Checks the shape only; binaries and symbols are resolved when the record starts. */
static int parse_region_opt(bool usdt, const char *arg, struct record_opts *o)
{
	const char **list = usdt ? o->usdts : o->regions;
	size_t *n = usdt ? &o->nusdts : &o->nregions;
	const char *c1 = strchr(arg, ':'), *c2 = strrchr(arg, ':');

	if (!c1 || c1 == arg || !c1[1] || (usdt && (c2 == c1 || c2[-1] == ':' || !c2[1]))) {
		log_err(usdt ? "invalid --usdt '%s': use BIN:PROVIDER:NAME"
			     : "invalid --region '%s': use BIN:SYMBOL or BIN:0xADDR",
			arg);
		return -EINVAL;
	}
	if (!usdt && !strncmp(arg, PY_REGION_PREFIX, strlen(PY_REGION_PREFIX))) {
		struct py_rcand c[PY_RCAND_MAX];
		int r = py_region_cands(arg + strlen(PY_REGION_PREFIX), 0, 0, c, PY_RCAND_MAX);

		if (r < 0) {
			log_err(r == -E2BIG ? "invalid --region '%s': name too long (at most %d "
					      "characters a part, %d dots)"
					    : "invalid --region '%s': use py:QUALNAME or "
					      "py:MODULE.QUALNAME (e.g. py:Trainer.step, py:train.main)",
				arg, PY_RNAME - 4, PY_RCAND_MAX - 1);
			return -EINVAL;
		}
	}
	if (*n == RECORD_MAX_REGIONS) {
		log_err("too many --%s options (at most %d)", usdt ? "usdt" : "region",
			RECORD_MAX_REGIONS);
		return -EINVAL;
	}
	list[(*n)++] = arg;
	return 0;
}

static int parse_one(int c, const char *arg, struct record_opts *o)
{
	unsigned long long v;
	char *end;

	switch (c) {
	case 'p':
		return parse_pids(arg, o);
	case 'a':
		o->all = true;
		return 0;
	case 'F':
		if (parse_uint(arg, 100000, &v) || v == 0) {
			log_err("invalid frequency '%s': use 1..100000", arg);
			return -EINVAL;
		}
		o->freq = v;
		return 0;
	case 'd':
		o->duration = strtod(arg, &end);
		if (*end || end == arg || !(o->duration > 0) || o->duration > 1e7) {
			log_err("invalid duration '%s': use seconds > 0", arg);
			return -EINVAL;
		}
		return 0;
	case 'o':
		o->output = arg;
		return 0;
	case 'g':
		return parse_callgraph(arg, o);
	case OPT_STACK_SIZE:
		if (parse_uint(arg, EPROF_MAX_SNAPSHOT, &v) || v < 512) {
			log_err("invalid --stack-size '%s': use 512..65536", arg);
			return -EINVAL;
		}
		o->snapshot_bytes = v;
		return 0;
	case OPT_RINGBUF:
		if (parse_uint(arg, 4096, &v) || v == 0) {
			log_err("invalid --ringbuf-mb '%s': use 1..4096", arg);
			return -EINVAL;
		}
		o->ringbuf_mb = v;
		return 0;
	case OPT_NO_KERNEL:
		o->no_kernel = true;
		return 0;
	case OPT_OFFCPU:
		o->offcpu = true;
		return 0;
	case OPT_OFFCPU_MIN:
		if (parse_uint(arg, 10000000, &v)) {
			log_err("invalid --offcpu-min-us '%s': use 0..10000000", arg);
			return -EINVAL;
		}
		o->offcpu_min_us = v;
		o->offcpu = true;
		return 0;
	case OPT_OFFCPU_RATE:
		if (parse_uint(arg, 10000000, &v)) {
			log_err("invalid --offcpu-stack-rate '%s': use 0..10000000", arg);
			return -EINVAL;
		}
		o->offcpu_stack_rate = v;
		o->offcpu = true;
		return 0;
	case OPT_OFFCPU_SAMPLE:
		if (parse_uint(arg, 10000000, &v)) {
			log_err("invalid --offcpu-sample-us '%s': use 0..10000000", arg);
			return -EINVAL;
		}
		o->offcpu_sample_us = v;
		o->offcpu = true;
		return 0;
	case OPT_CUDA:
		o->cuda = 1;
		return 0;
	case OPT_NO_CUDA:
		o->cuda = 0;
		return 0;
	case OPT_CUDA_RATE:
		if (parse_uint(arg, 1000000, &v)) {
			log_err("invalid --cuda-stack-rate '%s': use 0..1000000", arg);
			return -EINVAL;
		}
		o->cuda_stack_rate = v;
		return 0;
	case OPT_REGION:
	case OPT_USDT:
		return parse_region_opt(c == OPT_USDT, arg, o);
	case OPT_NO_AUTO_REGIONS:
		o->no_auto_regions = true;
		return 0;
	case OPT_NO_PYTHON:
		o->no_python = true;
		return 0;
	case OPT_NO_CHILDREN:
		o->no_children = true;
		return 0;
	case OPT_NO_INJECT:
		o->no_inject = true;
		return 0;
	case OPT_MEM:
		o->mem_sample = 512 * 1024;
		if (arg && (parse_uint(arg, 1ULL << 40, &v) || v == 0)) {
			log_err("invalid --mem '%s': use a mean of 1 (every allocation) or more bytes", arg);
			return -EINVAL;
		}
		if (arg)
			o->mem_sample = v;
		return 0;
	case 'q':
		o->quiet = true;
		return 0;
	case 'v':
		o->verbose++;
		return 0;
	}
	return -EINVAL;
}

int parse_record_args(int argc, char **argv, struct record_opts *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "all-cpus", no_argument, NULL, 'a' },
		{ "freq", required_argument, NULL, 'F' },
		{ "duration", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "call-graph", required_argument, NULL, 'g' },
		{ "stack-size", required_argument, NULL, OPT_STACK_SIZE },
		{ "ringbuf-mb", required_argument, NULL, OPT_RINGBUF },
		{ "no-kernel", no_argument, NULL, OPT_NO_KERNEL },
		{ "offcpu", no_argument, NULL, OPT_OFFCPU },
		{ "offcpu-min-us", required_argument, NULL, OPT_OFFCPU_MIN },
		{ "offcpu-stack-rate", required_argument, NULL, OPT_OFFCPU_RATE },
		{ "offcpu-sample-us", required_argument, NULL, OPT_OFFCPU_SAMPLE },
		{ "cuda", no_argument, NULL, OPT_CUDA },
		{ "no-cuda", no_argument, NULL, OPT_NO_CUDA },
		{ "cuda-stack-rate", required_argument, NULL, OPT_CUDA_RATE },
		{ "region", required_argument, NULL, OPT_REGION },
		{ "usdt", required_argument, NULL, OPT_USDT },
		{ "no-auto-regions", no_argument, NULL, OPT_NO_AUTO_REGIONS },
		{ "no-python", no_argument, NULL, OPT_NO_PYTHON },
		{ "no-children", no_argument, NULL, OPT_NO_CHILDREN },
		{ "no-inject", no_argument, NULL, OPT_NO_INJECT },
		{ "mem", optional_argument, NULL, OPT_MEM },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, modes;

	memset(o, 0, sizeof(*o));
	o->freq = 99;
	o->output = "eprof.data";
	o->snapshot_bytes = 32768;
	o->ringbuf_mb = 16;
	o->offcpu_min_us = 10;
	o->offcpu_stack_rate = 2000;
	o->offcpu_sample_us = 1000;
	o->cuda = -1;
	o->cuda_stack_rate = 100;
	optind = 0; /* 0, not 1: glibc then resets its internal state between parses */
	opterr = 0;
	/* "+": stop at the first non-option so "-- CMD -x" and "CMD -x" keep CMD's flags. */
	while ((c = getopt_long(argc, argv, "+p:aF:d:o:g:qvh", longopts, NULL)) != -1) {
		if (c == 'h')
			return 1;
		if (c == '?' || c == ':') {
			log_err("record: unknown option or missing argument '%s' (see eprof record --help)",
				argv[optind - 1]);
			return -EINVAL;
		}
		if (parse_one(c, optarg, o))
			return -EINVAL;
	}
	if (optind < argc)
		o->argv = &argv[optind];
	modes = (o->npids > 0) + o->all + (o->argv != NULL);
	if (modes != 1) {
		log_err(modes ? "record: choose one of -p PID, -a, or -- CMD"
			      : "record: nothing to profile: give -p PID, -a, or -- CMD ARGS");
		return -EINVAL;
	}
	if (o->all && o->no_children) {
		log_err("record: --no-children limits -p PID or a command; -a records every process");
		return -EINVAL;
	}
	if (o->all && !o->duration)
		log_info("recording the whole system until Ctrl-C");
	return 0;
}
