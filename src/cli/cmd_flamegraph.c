// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph/flamegraph.h"
#include "analysis/critpath.h"
#include "analysis/offcpu.h"
#include "analysis/gpu.h"
#include "analysis/io.h"
#include "analysis/regions.h"
#include "analysis/memory.h"
#include "analysis/pygil.h"
#include "analysis/stacks.h"
#include "cmds.h"
#include "output/folded.h"
#include "output/svg.h"
#include "util/log.h"
#include "util/sink.h"

static const struct opt_choice gil_states[] = {
	{ "held", GIL_HELD }, { "not-held", GIL_NOT_HELD }, { NULL }
};

/* --gil colours, --gil=held|not-held filters: both may be given. */
static int opt_gil(const struct opt *o, const char *arg, void *field)
{
	struct flamegraph_cli *f = field;

	for (const struct opt_choice *c = gil_states; arg && c->name; c++)
		if (!strcmp(arg, c->name)) {
			f->gil = c->val;
			return 0;
		}
	if (!arg) {
		f->gil_colors = true;
		return 0;
	}
	log_err("invalid --gil '%s' (expected --gil (colours), --gil=held or --gil=not-held)", arg);
	return -EINVAL;
}

#define FG_WEIGHT(l, w, h) OPT_SET(l, 0, struct flamegraph_cli, weights, w, h)

static const struct opt fg_opts[] = {
	OPT_STRING("output", 'o', "FILE", struct flamegraph_cli, output,
		   "SVG (default flamegraph.svg) or folded text (default stdout)"),
	FG_WEIGHT("cpu", FG_CPU, "CPU samples (the default)"),
	FG_WEIGHT("offcpu", FG_OFFCPU, "blocked time (record --offcpu), weighted by ns"),
	FG_WEIGHT("wakers", FG_WAKERS, "blocked time on the stacks of the threads that ended it\n"
				       "(--pid/--tid select the blocked threads)"),
	FG_WEIGHT("wall", FG_WALL, "CPU time and blocked time per thread, in ns"),
	FG_WEIGHT("critical-path", FG_CRITICAL_PATH,
		  "the critical path's time (see eprof critical-path)"),
	FG_WEIGHT("gpu", FG_GPU, "GPU kernel/copy ns on the CPU stacks that launched them"),
	FG_WEIGHT("cuda-api", FG_CUDA_API, "ns in CUDA API calls on the calling CPU stacks"),
	FG_WEIGHT("mem", FG_MEM, "bytes allocated, by allocating stack (record --mem)"),
	FG_WEIGHT("mem-peak", FG_MEM_PEAK, "bytes live at the peak of the heap"),
	FG_WEIGHT("leaks", FG_LEAKS, "bytes not freed by the end of the record"),
	FG_WEIGHT("io", FG_IO, "bytes read and written by calling stack, the file or\n"
			       "peer as the leaf (record --io)"),
	FG_WEIGHT("io-time", FG_IO_TIME, "ns in reads and writes by calling stack and file"),
	OPT_FLAG("folded", 0, struct flamegraph_cli, folded,
		 "folded stacks (comm;root;...;leaf COUNT) instead of SVG"),
	OPT_FLAG("lines", 0, struct flamegraph_cli, lines, "add (file:line) to frames"),
	OPT_FLAG("ns", 0, struct flamegraph_cli, weight_ns,
		 "weigh by CPU ns instead of sample counts"),
	OPT_FLAG("no-comm", 0, struct flamegraph_cli, no_comm, "no thread-name root frame"),
	OPT_GROUP(struct flamegraph_cli, filter, cli_filter_opts),
	OPT_STRING("region", 0, "NAME", struct flamegraph_cli, region,
		   "only samples inside that region"),
	OPT_FUNC("gil", 0, "held|not-held", opt_gil,
		 "without a value: open coloured by the GIL: the share of each\n"
		 "frame's Python samples whose thread held it (a toggle in the\n"
		 "viewer); held, not-held: only Python samples with / without it",
		 .optional = true),
	OPT_STRING("title", 0, "TEXT", struct flamegraph_cli, title, "the graph's title"),
	OPT_UINT("width", 0, "PX", struct flamegraph_cli, width, 200, 100000,
		 "the SVG's width (default 1200)"),
	OPT_FLAG("inverted", 0, struct flamegraph_cli, inverted,
		 "root at the top, callees below (icicle); the default\n"
		 "opens scrolled to the root at the bottom (a toggle in the viewer)"),
	OPT_JOB_SELECT(struct flamegraph_cli, more),
	OPT_CHOICE("view", 0, struct flamegraph_cli, view, cmd_view_choices,
		   "stacks as Python frames and the native leaf, all frames\n"
		   "(default) or native frames only (docs/python.md); the\n"
		   "SVG opens on it and switches views in the viewer"),
	OPT_END,
};

static const struct flamegraph_cli fg_defaults = {
	.input = "eprof.data", .width = 1200, .more.rank = -1
};

static int fg_finish(void *opts, int npos, char **pos)
{
	struct flamegraph_cli *o = opts;

	if (!o->output)
		o->output = o->folded ? "-" : "flamegraph.svg";
	if (o->region && o->weights != FG_CPU) {
		log_err("--region selects CPU samples: it cannot be combined with other weights");
		return -EINVAL;
	}
	if ((o->gil || o->gil_colors) && o->weights != FG_CPU) {
		log_err("--gil goes with CPU samples: the GIL state is read when a thread is "
			"sampled");
		return -EINVAL;
	}
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
					      "Blocked time by waker stack", "I/O bytes by stack",
					      "I/O time by stack" };
	struct svg_opts so = {
	    .stacks = { .filter = o->filter, .lines = o->lines, .weight_ns = o->weight_ns,
			.no_comm = o->no_comm, .gil = o->gil, .view = o->view },
	    .fg = { .title = o->title ? o->title : titles[o->weights],
		    .subtitle = profile__meta(p, "command"),
		    .unit = fg_is_mem(o->weights) || o->weights == FG_IO ? "bytes"
			    : o->weight_ns			       ? "ns"
								       : "samples",
		    .width = o->width,
		    .inverted = o->inverted,
		    .gil_colors = o->gil_colors },
	    .all_views = true,
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

/* Replaces the CPU samples with the weights asked for; 0 or 1 (logged). */
static int load_weights(struct profile *p, struct flamegraph_cli *o)
{
	int err;

	if (fg_is_mem(o->weights)) {
		static const enum mem_view views[] = { [FG_MEM] = MEM_VIEW_ALLOCATED,
						       [FG_MEM_PEAK] = MEM_VIEW_PEAK,
						       [FG_LEAKS] = MEM_VIEW_LEAKS };

		err = memory_to_samples(p, views[o->weights]);
		if (err) {
			log_err(err == -ENOENT ? "no allocations in '%s': record with --mem"
					       : "failed to read allocations of '%s'", o->input);
			return 1;
		}
		o->weight_ns = true; /* the weight of a memory sample is its bytes */
	} else if (o->weights == FG_GPU || o->weights == FG_CUDA_API) {
		bool gpu = o->weights == FG_GPU;
		int64_t n = gpu_to_samples(p, gpu ? GPU_WEIGHT_GPU_NS : GPU_WEIGHT_API_NS);

		if (n <= 0) {
			log_err(n < 0 ? "failed to build the GPU stacks: out of memory"
			    : gpu ? "no GPU activity in '%s' (it needs CUPTI: eprof record -- CMD)"
				  : "no CUDA API calls in '%s'",
				o->input);
			return 1;
		}
		o->weight_ns = true;
	} else if (o->weights == FG_IO || o->weights == FG_IO_TIME) {
		err = io_to_samples(p, o->weights == FG_IO ? IO_WEIGHT_BYTES : IO_WEIGHT_TIME,
				    &o->filter);
		if (err) {
			log_err(err == -ENOENT ? "no I/O calls in '%s': record with --io"
					       : "failed to read the I/O calls of '%s'", o->input);
			return 1;
		}
		/* The pseudo-samples are filtered already; the weight is bytes or ns. */
		memset(&o->filter, 0, sizeof(o->filter));
		o->weight_ns = true;
	} else if (o->weights != FG_CPU) {
		if (swap_in_weights(p, o))
			return 1;
	}
	return 0;
}

static int fg_run(struct cmd_ctx *c)
{
	struct flamegraph_cli *o = c->opts;
	struct region_ranges *ranges = NULL;
	struct profile *p = c->in[0];
	int err;

	if (load_weights(p, o))
		return 1;
	if ((o->gil || o->gil_colors) && !has_gil_marks(p)) {
		log_err("--gil: '%s' has no GIL states (they come with the CPU samples of CPython "
			"3.10-3.13 threads)", o->input);
		return 1;
	}
	if (o->region && region_filter_apply(p, o->region, &o->filter, &ranges))
		return 1;
	if (!cmd_output(c)) {
		err = 1;
	} else if (o->folded) {
		struct folded_opts fo = { .filter = o->filter, .lines = o->lines,
					  .weight_ns = o->weight_ns, .no_comm = o->no_comm,
					  .gil = o->gil, .view = o->view };

		err = folded_write(c->out, p, &fo);
	} else {
		err = write_svg(c->out, p, o);
	}
	region_ranges__free(ranges);
	return err;
}

static int fg_after(struct cmd_ctx *c)
{
	const struct flamegraph_cli *o = c->opts;

	if (!o->folded && strcmp(o->output, "-"))
		fprintf(stderr, "eprof: flamegraph written to %s\n", o->output);
	return 0;
}

const struct command cmd_flamegraph = {
	.name = "flamegraph",
	.summary = "interactive SVG flamegraph or folded stacks",
	.usage = "[FILE...|DIR|GLOB] [options]   (FILE defaults to eprof.data)",
	.about = "Several recordings of a job's ranks: one flamegraph, a HOST/rank N root frame "
		 "per rank.\n",
	CMD_OPTIONS(fg_opts, fg_defaults),
	/*
	 * No CMD_VIEW: the stacks are read in --view after the weights (the SVG carries every
	 * view of a profile with Python frames), so the profile stays as recorded.
	 */
	CMD_JOB_READER(struct flamegraph_cli, more, CMD_JOB_MERGE | CMD_JOB_RANK_ROOT),
	.finish = fg_finish,
	.run = fg_run,
	.after = fg_after,
};

int parse_flamegraph_args(int argc, char **argv, struct flamegraph_cli *o)
{
	return cmd_parse(&cmd_flamegraph, argc, argv, o);
}
