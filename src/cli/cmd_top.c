// SPDX-License-Identifier: MIT
/* eprof top: a live session folded into a decayed function table every refresh. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmds.h"
#include "tui/top_gpu.h"
#include "tui/top_metrics.h"
#include "tui/top_ui.h"
#include "util/log.h"

#define FIRST_SCREEN_S 0.5 /* the first refresh comes early: something to look at at once */

static const struct opt_choice top_sorts[] = {
	{ "self", TOP_SORT_SELF }, { "total", TOP_SORT_TOTAL }, { "last", TOP_SORT_LAST }, { NULL }
};

/* CUDA tables instead of functions: counts only, launches need no stack here. */
static int opt_gpu(const struct opt *opt, const char *arg, void *field)
{
	struct top_cli *o = field;

	o->gpu = true;
	o->rec.cuda = 1;
	o->rec.cuda_stack_rate = 0;
	return 0;
}

static const struct opt top_opts[] = {
	OPT_GROUP(struct top_cli, rec, record_target_opts),
	OPT_DOUBLE("delay", 'd', "SECONDS", struct top_cli, delay, 0.1, 3600,
		   "refresh interval (default 1)", .expect = "0.1..3600 seconds"),
	OPT_CHOICE("sort", 's', struct top_cli, sort, top_sorts, "table order (default self)"),
	OPT_FLAG("batch", 'b', struct top_cli, batch, "plain-text snapshots on stdout, no curses"),
	OPT_UINT("iterations", 'n', "N", struct top_cli, iterations, 1, 1000000000,
		 "stop after N snapshots (default: until stopped)"),
	OPT_GROUP(struct top_cli, rec, record_sampling_opts),
	OPT_FUNC("gpu", 0, NULL, opt_gpu,
		 "CUDA instead of functions: GPU time per kernel (the CUPTI\n"
		 "collector injected into the targets), launches per kernel,\n"
		 "calls, time and failures per CUDA function (needs -p)"),
	OPT_FLAG("no-inject", 0, struct top_cli, rec.no_inject,
		 "--gpu without the CUPTI collector: uprobes only"),
	OPT_VIEW(struct top_cli, view),
	OPT_END,
};

static const struct top_cli top_defaults = {
	.rec = { .freq = 99, .snapshot_bytes = 32768, .ringbuf_mb = 16, .live = true },
	.delay = 1.0,
};

static int top_finish(void *opts, int npos, char **pos)
{
	struct top_cli *o = opts;

	if (npos) {
		log_err("unexpected argument '%s' (eprof top watches -p PID or -a)", pos[0]);
		return -EINVAL;
	}
	if (o->rec.all && o->rec.npids) {
		log_err("-p and -a cannot be combined");
		return -EINVAL;
	}
	if (o->rec.no_children && !o->rec.npids) {
		log_err("--no-children needs -p PID: it limits top to the listed processes");
		return -EINVAL;
	}
	if (o->gpu && !o->rec.npids) {
		log_err("--gpu needs -p PID: CUDA libraries are found in the targets' maps");
		return -EINVAL;
	}
	if (!o->rec.npids)
		o->rec.all = true;
	return 0;
}

static void targets_text(struct top_cli *o, struct profile *p, char *buf, size_t len)
{
	size_t off = 0;

	if (o->rec.all) {
		snprintf(buf, len, "system-wide");
		return;
	}
	buf[0] = 0;
	for (size_t i = 0; i < o->rec.npids && off + 32 < len; i++) {
		struct process *pr = profile__proc(p, o->rec.pids[i], false);

		off += snprintf(buf + off, len - off, "%spid %u (%s)", i ? ", " : "", o->rec.pids[i],
				pr && pr->comm ? profile__str(p, pr->comm) : "?");
	}
}

struct top_run {
	struct top_cli *o;
	struct session *s;
	struct top_model m;
	struct top_gpu g;
	struct top_metrics res;
	struct top_view v;
	struct top_header h;
	struct top_ui *ui;
	char targets[512];
	bool paused;
	unsigned shown;
};

static void fill_header(struct top_run *r)
{
	struct live_stats st;

	live_stats(r->s, &st);
	targets_text(r->o, live_profile(r->s), r->targets, sizeof(r->targets));
	r->h.targets = r->targets;
	r->h.uptime_s = (st.now_ns - st.start_ns) / 1e9;
	r->h.lost = st.lost;
	r->h.freq = r->o->rec.freq;
	r->h.ncpus = st.ncpus;
	r->h.paused = r->paused;
	r->h.res = &r->res;
}

static int batch_snapshot(struct top_run *r)
{
	struct sink *out = sink_text(sink_file(stdout, 0));
	int err;

	if (!out)
		return -ENOMEM;
	if (r->shown > 1)
		sink_puts(out, "\n");
	top_render(out, &r->m, live_profile(r->s), &r->h, &r->v, 120, 40);
	err = sink_close(out);
	if (err)
		log_err("failed to write the snapshot: %s", strerror(-err));
	return err;
}

/* One refresh: symbolize what is new, fold the interval in, show it. */
static int refresh_view(struct top_run *r, double dt)
{
	struct profile *p = live_profile(r->s);
	int err;

	if (r->paused) {
		p->samples.n = 0; /* a frozen screen: what comes meanwhile is not shown */
		p->events.n = 0;
		return 0;
	}
	err = live_symbolize(r->s);
	if (!err)
		err = top_metrics__update(&r->res, p, dt);
	if (!err && r->v.gpu)
		err = top_gpu__update(&r->g, p, dt);
	p->events.n = 0; /* folded in: what the next interval brings is new */
	if (!err)
		err = top_model__update(&r->m, p, dt);
	if (err) {
		log_err("failed to update the view: %s", strerror(-err));
		return err;
	}
	fill_header(r);
	r->shown++;
	if (r->ui) {
		top_ui__draw(r->ui, &r->m, p, &r->h);
		return 0;
	}
	return batch_snapshot(r);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int top_loop(struct top_run *r)
{
	double last = mono_s(), wait = r->o->delay < FIRST_SCREEN_S ? r->o->delay : FIRST_SCREEN_S;
	int err = 0;

	for (;;) {
		bool redraw = false;
		double t;

		err = live_poll(r->s);
		if (err)
			return err < 0 ? err : 0;
		if (r->ui && top_ui__keys(r->ui, &r->m, live_profile(r->s), &r->paused, &redraw))
			return 0;
		t = mono_s();
		if (t - last >= wait) {
			err = refresh_view(r, t - last);
			if (err)
				return err;
			last = t;
			wait = r->o->delay;
			if (r->o->iterations && r->shown >= r->o->iterations)
				return 0;
		} else if (redraw) {
			fill_header(r);
			top_ui__draw(r->ui, &r->m, live_profile(r->s), &r->h);
		}
	}
}

static int top_main(struct cmd_ctx *c)
{
	struct top_cli *o = c->opts;
	struct top_run r = { .o = o };
	struct live_stats st;
	int err;

	r.v.sort = o->sort;
	if (top_model__init(&r.m))
		return 1;
	r.m.view = o->view;
	if (top_gpu__init(&r.g)) {
		top_model__free(&r.m);
		return 1;
	}
	if (o->gpu)
		r.v.gpu = &r.g;
	err = live_open(&o->rec, &r.s);
	if (!err && !o->batch) {
		r.ui = top_ui__new(&r.v);
		if (!r.ui) {
			log_err("failed to start the full-screen view: %s (use --batch)",
				strerror(errno));
			err = -ENOTTY;
		}
	}
	if (!err) {
		fill_header(&r);
		if (r.ui)
			top_ui__draw(r.ui, &r.m, live_profile(r.s), &r.h);
		err = top_loop(&r);
	}
	top_ui__free(r.ui);
	if (r.s) {
		live_stats(r.s, &st);
		if (st.stop_reason)
			fprintf(stderr, "eprof top: %s\n", st.stop_reason);
	}
	live_close(r.s);
	top_model__free(&r.m);
	top_gpu__free(&r.g);
	top_metrics__free(&r.res);
	return err ? 1 : 0;
}

const struct command cmd_top = {
	.name = "top",
	.summary = "live view of the hottest functions of processes or the system",
	.usage = "[-p PID[,PID..] | -a] [options]   (default -a: the whole system)",
	.footer = "Keys: q quit, s sort, P pause, t threads, / filter, Enter callers/callees, "
		  "h help.\n",
	CMD_OPTIONS(top_opts, top_defaults),
	.flags = CMD_NEEDS_ROOT,
	.finish = top_finish,
	.run = top_main,
};

int parse_top_args(int argc, char **argv, struct top_cli *o)
{
	return cmd_parse(&cmd_top, argc, argv, o);
}
