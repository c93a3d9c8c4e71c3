// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "../flamegraph/flamegraph.h"
#include "analysis/critpath.h"
#include "analysis/offcpu.h"
#include "analysis/gpu.h"
#include "analysis/regions.h"
#include "analysis/memory.h"
#include "analysis/pygil.h"
#include "analysis/stacks.h"
#include "cmds.h"
#include "cli/open.h"
#include "output/folded.h"
#include "output/svg.h"
#include "util/cli.h"
#include "util/log.h"
#include "util/sink.h"

static void flamegraph_usage(FILE *f)
{
	fprintf(f, "usage: eprof flamegraph [FILE] [options]   (FILE defaults to eprof.data)\n"
		   "  -o, --output FILE   SVG (default flamegraph.svg) or folded text (default stdout)\n"
		   "      --cpu           CPU samples (the default)\n"
		   "      --offcpu        blocked time (record --offcpu), weighted by ns\n"
		   "      --wakers        blocked time on the stacks of the threads that ended it\n"
		   "                      (--pid/--tid select the blocked threads)\n"
		   "      --wall          CPU time and blocked time per thread, in ns\n"
		   "      --critical-path the critical path's time (see eprof critical-path)\n"
		   "      --gpu           GPU kernel/copy ns on the CPU stacks that launched them\n"
		   "      --cuda-api      ns in CUDA API calls on the calling CPU stacks\n"
		   "      --mem           bytes allocated, by allocating stack (record --mem)\n"
		   "      --mem-peak      bytes live at the peak of the heap\n"
		   "      --leaks         bytes not freed by the end of the record\n"
		   "      --folded        folded stacks (comm;root;...;leaf COUNT) instead of SVG\n"
		   "      --lines         add (file:line) to frames\n"
		   "      --ns            weigh by CPU ns instead of sample counts\n"
		   "      --no-comm       no thread-name root frame\n"
		   "      --pid PID, --tid TID  only these samples\n"
		   "      --region NAME   only samples inside that region\n"
		   "      --gil           open coloured by the GIL: the share of each frame's Python\n"
		   "                      samples whose thread held it (a toggle in the viewer)\n"
		   "      --gil=held, --gil=not-held  only Python samples with / without the GIL\n"
		   "      --title TEXT, --width PX\n"
		   "      --inverted      root at the top, callees below (icicle); the default\n"
		   "                      opens scrolled to the root at the bottom (a toggle in the viewer)\n");
}

enum {
	F_CPU = 256, F_OFFCPU, F_WALL, F_CRIT, F_GPU, F_CUDA_API, F_MEM, F_MEM_PEAK, F_LEAKS, F_FOLDED,
	F_LINES, F_NS, F_NOCOMM, F_PID, F_TID, F_TITLE, F_WIDTH, F_INV, F_REGION, F_GIL,
	F_WAKERS
};

static int fg_opt(int c, const char *arg, void *opts)
{
	struct flamegraph_cli *o = opts;

	switch (c) {
	case 'o':
		o->output = arg;
		return 0;
	case F_CPU:
		o->weights = FG_CPU;
		return 0;
	case F_OFFCPU:
		o->weights = FG_OFFCPU;
		return 0;
	case F_WALL:
		o->weights = FG_WALL;
		return 0;
	case F_WAKERS:
		o->weights = FG_WAKERS;
		return 0;
	case F_CRIT:
		o->weights = FG_CRITICAL_PATH;
		return 0;
	case F_GPU:
		o->weights = FG_GPU;
		return 0;
	case F_CUDA_API:
		o->weights = FG_CUDA_API;
		return 0;
	case F_MEM:
		o->weights = FG_MEM;
		return 0;
	case F_MEM_PEAK:
		o->weights = FG_MEM_PEAK;
		return 0;
	case F_LEAKS:
		o->weights = FG_LEAKS;
		return 0;
	case F_FOLDED:
		o->folded = true;
		return 0;
	case F_LINES:
		o->lines = true;
		return 0;
	case F_NS:
		o->weight_ns = true;
		return 0;
	case F_NOCOMM:
		o->no_comm = true;
		return 0;
	case F_PID:
		return parse_u32_arg("--pid", arg, 1, 0x7fffffff, &o->filter.pid);
	case F_TID:
		return parse_u32_arg("--tid", arg, 1, 0x7fffffff, &o->filter.tid);
	case F_TITLE:
		o->title = arg;
		return 0;
	case F_WIDTH:
		return parse_u32_arg("--width", arg, 200, 100000, &o->width);
	case F_INV:
		o->inverted = true;
		return 0;
	case F_REGION:
		o->region = arg;
		return 0;
	case F_GIL:
		if (!arg) {
			o->gil_colors = true;
			return 0;
		}
		if (!strcmp(arg, "held") || !strcmp(arg, "not-held")) {
			o->gil = arg[0] == 'h' ? GIL_HELD : GIL_NOT_HELD;
			return 0;
		}
		log_err("invalid --gil '%s': use --gil (colours), --gil=held or --gil=not-held", arg);
		return -EINVAL;
	}
	return -EINVAL;
}

int parse_flamegraph_args(int argc, char **argv, struct flamegraph_cli *o)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "cpu", no_argument, NULL, F_CPU },
		{ "offcpu", no_argument, NULL, F_OFFCPU },
		{ "wall", no_argument, NULL, F_WALL },
		{ "wakers", no_argument, NULL, F_WAKERS },
		{ "critical-path", no_argument, NULL, F_CRIT },
		{ "gpu", no_argument, NULL, F_GPU },
		{ "cuda-api", no_argument, NULL, F_CUDA_API },
		{ "mem", no_argument, NULL, F_MEM },
		{ "mem-peak", no_argument, NULL, F_MEM_PEAK },
		{ "leaks", no_argument, NULL, F_LEAKS },
		{ "folded", no_argument, NULL, F_FOLDED },
		{ "lines", no_argument, NULL, F_LINES },
		{ "ns", no_argument, NULL, F_NS },
		{ "no-comm", no_argument, NULL, F_NOCOMM },
		{ "pid", required_argument, NULL, F_PID },
		{ "tid", required_argument, NULL, F_TID },
		{ "title", required_argument, NULL, F_TITLE },
		{ "width", required_argument, NULL, F_WIDTH },
		{ "inverted", no_argument, NULL, F_INV },
		{ "region", required_argument, NULL, F_REGION },
		{ "gil", optional_argument, NULL, F_GIL },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static const struct cli_spec spec = { "flamegraph", "o:h", longopts, fg_opt };
	const char *pos[1];
	int npos, err;

	memset(o, 0, sizeof(*o));
	o->input = "eprof.data";
	o->width = 1200;
	err = cli_parse(&spec, argc, argv, o, pos, 1, &npos);
	if (err)
		return err;
	if (npos)
		o->input = pos[0];
	if (!o->output)
		o->output = o->folded ? "-" : "flamegraph.svg";
	return 0;
}

/* Turns collapsed stacks into the renderer's input; labels live in labels[] (owned). */
static int write_svg(struct sink *out, const struct profile *p, const struct flamegraph_cli *o)
{
	static const char *const titles[] = { "CPU flamegraph", "Off-CPU flamegraph",
					      "Wall-clock flamegraph", "Critical path flamegraph",
					      "GPU time by launching CPU stack", "CUDA API time",
					      "Allocated bytes", "Live bytes at the peak",
					      "Bytes not freed (leaks)",
					      "Blocked time by waker stack" };
	struct svg_opts so = {
	    .stacks = { .filter = o->filter, .lines = o->lines, .weight_ns = o->weight_ns,
			.no_comm = o->no_comm, .gil = o->gil },
	    .fg = { .title = o->title ? o->title : titles[o->weights],
		    .subtitle = profile__meta(p, "command"),
		    .unit = fg_is_mem(o->weights) ? "bytes" : o->weight_ns ? "ns" : "samples",
		    .width = o->width,
		    .inverted = o->inverted,
		    .gil_colors = o->gil_colors },
	};

	return flamegraph_svg_write(out, p, &so);
}

/*
 * Off-CPU, wall and critical-path graphs: their weighted pseudo-samples
 * replace the CPU samples, so folded and SVG writers need nothing new.
 */
static int swap_in_weights(struct profile *p, struct flamegraph_cli *o)
{
	struct sample *v = NULL;
	size_t n = 0;
	int err;

	/* The critical path also runs through GPU work alone (launches and syncs). */
	if (!offcpu_count(p) && (o->weights != FG_CRITICAL_PATH || !gpu_present(p))) {
		log_err("'%s' has no off-CPU data: record with --offcpu", o->input);
		return -ENOENT;
	}
	if (o->weights == FG_CRITICAL_PATH) {
		struct cp_graph g;
		struct cp_path path;
		uint32_t track;
		uint64_t end;

		err = critpath_build(p, &g);
		if (err)
			return err;
		err = critpath_default_end(&g, &track, &end);
		if (!err)
			err = critpath_walk(&g, track, end, 0, &path);
		critpath_free(&g);
		if (!err) {
			err = critpath_samples(p, &path, &v, &n);
			critpath_path_free(&path);
		}
	} else {
		err = offcpu_samples(p, o->weights == FG_WALL	  ? OFFCPU_W_WALL
					: o->weights == FG_WAKERS ? OFFCPU_W_WAKERS
								  : OFFCPU_W_OFF,
				     &o->filter, &v, &n);
	}
	if (err) {
		log_err("failed to compute the %s: %s", o->weights == FG_CRITICAL_PATH ? "critical path" : "off-CPU weights", strerror(-err));
		return err;
	}
	free(p->samples.v);
	p->samples.v = v;
	p->samples.n = p->samples.cap = n;
	/* The pseudo-samples are already filtered (the path is its own selection). */
	memset(&o->filter, 0, sizeof(o->filter));
	o->weight_ns = true;
	return 0;
}

static bool has_gil_marks(const struct profile *p)
{
	bool any = false;
	uint8_t *roots = py_gil_roots(p, &any);

	free(roots);
	return any;
}

int cmd_flamegraph(int argc, char **argv)
{
	struct flamegraph_cli o;
	struct region_ranges *ranges = NULL;
	struct profile *p = NULL;
	struct sink *out;
	int err;

	err = parse_flamegraph_args(argc, argv, &o);
	if (err == 1) {
		flamegraph_usage(stdout);
		return 0;
	}
	if (err)
		return 2;
	if (o.region && o.weights != FG_CPU) {
		log_err("--region selects CPU samples: it cannot be combined with other weights");
		return 2;
	}
	if ((o.gil || o.gil_colors) && o.weights != FG_CPU) {
		log_err("--gil goes with CPU samples: the GIL state is read when a thread is sampled");
		return 2;
	}
	if (profile_open(o.input, &p))
		return 1;
	if (fg_is_mem(o.weights)) {
		static const enum mem_view views[] = { [FG_MEM] = MEM_VIEW_ALLOCATED,
						       [FG_MEM_PEAK] = MEM_VIEW_PEAK,
						       [FG_LEAKS] = MEM_VIEW_LEAKS };

		err = memory_to_samples(p, views[o.weights]);
		if (err) {
			log_err(err == -ENOENT ? "no allocations in '%s': record with --mem"
					       : "failed to read allocations of '%s'", o.input);
			profile__free(p);
			return 1;
		}
		o.weight_ns = true; /* the weight of a memory sample is its bytes */
	} else if (o.weights == FG_GPU || o.weights == FG_CUDA_API) {
		bool gpu = o.weights == FG_GPU;
		int64_t n = gpu_to_samples(p, gpu ? GPU_WEIGHT_GPU_NS : GPU_WEIGHT_API_NS);

		if (n <= 0) {
			log_err(n < 0 ? "failed to build the GPU stacks: out of memory"
			    : gpu ? "no GPU activity in '%s' (it needs CUPTI: eprof record -- CMD)"
				  : "no CUDA API calls in '%s'",
				o.input);
			profile__free(p);
			return 1;
		}
		o.weight_ns = true;
	} else if (o.weights != FG_CPU) {
		err = swap_in_weights(p, &o);
		if (err) {
			profile__free(p);
			return 1;
		}
	}
	if ((o.gil || o.gil_colors) && !has_gil_marks(p)) {
		log_err("--gil: '%s' has no GIL states (they come with the CPU samples of CPython "
			"3.10-3.13 threads)", o.input);
		profile__free(p);
		return 1;
	}
	if (o.region && region_filter_apply(p, o.region, &o.filter, &ranges)) {
		profile__free(p);
		return 1;
	}
	out = sink_open(o.output, 0644);
	if (!out) {
		log_err("failed to open '%s': %s", o.output, strerror(errno));
		region_ranges__free(ranges);
		profile__free(p);
		return 1;
	}
	if (o.folded) {
		struct folded_opts fo = { .filter = o.filter, .lines = o.lines,
					  .weight_ns = o.weight_ns, .no_comm = o.no_comm,
					  .gil = o.gil };

		err = folded_write(out, p, &fo);
	} else {
		err = write_svg(out, p, &o);
	}
	err = sink_close(out) ?: err;
	region_ranges__free(ranges);
	profile__free(p);
	if (err) {
		log_err("failed to write '%s': %s", o.output, strerror(-err));
		return 1;
	}
	if (!o.folded && strcmp(o.output, "-"))
		fprintf(stderr, "eprof: flamegraph written to %s\n", o.output);
	return 0;
}
