// SPDX-License-Identifier: MIT
/* eprof top: a live session folded into a decayed function table every refresh. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmds.h"
#include "tui/top_gpu.h"
#include "tui/top_ui.h"
#include "util/log.h"

#define FIRST_SCREEN_S 0.5 /* the first refresh comes early: something to look at at once */

static void top_usage(FILE *f)
{
	fprintf(f,
		"usage: eprof top [-p PID[,PID..] | -a] [options]\n"
		"  -p, --pid PID[,PID]     processes to watch: all their threads, their descendants running\n"
		"                          now and the children they fork later\n"
		"      --no-children       only the listed PIDs\n"
		"  -a, --all-cpus          the whole system (default when no -p)\n"
		"  -F, --freq HZ           samples per second per CPU (default 99, max 100000)\n"
		"  -d, --delay SECONDS     refresh interval (default 1)\n"
		"  -s, --sort KEY          self (default), total or last\n"
		"  -b, --batch             plain-text snapshots on stdout, no curses\n"
		"  -n, --iterations N      stop after N snapshots (default: until stopped)\n"
		"  -g, --call-graph MODE   auto (default), fp, dwarf\n"
		"      --no-kernel         user stacks only\n"
		"      --gpu               CUDA instead of functions: GPU time per kernel (the CUPTI\n"
		"                          collector injected into the targets), launches per kernel,\n"
		"                          calls, time and failures per CUDA function (needs -p)\n"
		"      --no-inject         --gpu without the CUPTI collector: uprobes only\n"
		"  -v, --verbose           more messages (repeat for debug)\n"
		"Keys: q quit, s sort, P pause, t threads, / filter, Enter callers/callees, h help.\n");
}

static int top_pids(const char *arg, struct record_opts *o)
{
	char *copy = strdup(arg), *save = NULL, *tok, *end;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long v;

		errno = 0;
		v = strtol(tok, &end, 10);
		if (errno || *end || end == tok || v <= 0 || v > 0x7fffffff ||
		    o->npids == RECORD_MAX_PIDS) {
			log_err("invalid PID '%s'", tok);
			free(copy);
			return -EINVAL;
		}
		o->pids[o->npids++] = v;
	}
	free(copy);
	if (!o->npids) {
		log_err("-p needs at least one PID");
		return -EINVAL;
	}
	return 0;
}

static int top_opt(int c, const char *arg, struct top_cli *o)
{
	char *end;

	switch (c) {
	case 'p':
		return top_pids(arg, &o->rec);
	case 'a':
		o->rec.all = true;
		return 0;
	case 'F':
		return parse_u32_arg("-F", arg, 1, 100000, &o->rec.freq);
	case 'd':
		o->delay = strtod(arg, &end);
		if (*end || end == arg || !(o->delay >= 0.1 && o->delay <= 3600)) {
			log_err("invalid delay '%s' (seconds, 0.1 to 3600)", arg);
			return -EINVAL;
		}
		return 0;
	case 's':
		for (int s = 0; s < TOP_SORT_MAX; s++)
			if (!strcmp(arg, top_sort_name(s))) {
				o->sort = s;
				return 0;
			}
		log_err("invalid sort '%s' (self, total or last)", arg);
		return -EINVAL;
	case 'b':
		o->batch = true;
		return 0;
	case 'n':
		return parse_u32_arg("-n", arg, 1, 1000000000, &o->iterations);
	case 'g':
		if (!strcmp(arg, "auto") || !strcmp(arg, "fp") || !strcmp(arg, "dwarf")) {
			o->rec.callgraph = arg[0] == 'a' ? CG_AUTO : arg[0] == 'f' ? CG_FP : CG_DWARF;
			return 0;
		}
		log_err("invalid call graph mode '%s' (auto, fp or dwarf)", arg);
		return -EINVAL;
	case 'K':
		o->rec.no_kernel = true;
		return 0;
	case 'C':
		o->rec.no_children = true;
		return 0;
	case 'G':
		o->gpu = true;
		o->rec.cuda = 1;
		o->rec.cuda_stack_rate = 0; /* counts only: launches need no stack here */
		return 0;
	case 'v':
		o->rec.verbose++;
		return 0;
	case 'I':
		o->rec.no_inject = true;
		return 0;
	}
	return -EINVAL;
}

int parse_top_args(int argc, char **argv, struct top_cli *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, 0, 'p' },	    { "all-cpus", no_argument, 0, 'a' },
		{ "freq", required_argument, 0, 'F' },	    { "delay", required_argument, 0, 'd' },
		{ "sort", required_argument, 0, 's' },	    { "batch", no_argument, 0, 'b' },
		{ "iterations", required_argument, 0, 'n' }, { "call-graph", required_argument, 0, 'g' },
		{ "no-kernel", no_argument, 0, 'K' },	    { "verbose", no_argument, 0, 'v' },
		{ "gpu", no_argument, 0, 'G' },	    { "no-children", no_argument, 0, 'C' },
		{ "no-inject", no_argument, 0, 'I' },
		{ "help", no_argument, 0, 'h' },	    { 0 }
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->rec.freq = 99;
	o->rec.snapshot_bytes = 32768;
	o->rec.ringbuf_mb = 16;
	o->rec.live = true;
	o->delay = 1.0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "p:aF:d:s:bn:g:vh", longopts, NULL)) != -1) {
		if (c == 'h')
			return 1;
		if (c == '?' || top_opt(c, optarg, o))
			return -EINVAL;
	}
	if (optind < argc) {
		log_err("unexpected argument '%s' (eprof top watches -p PID or -a)", argv[optind]);
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
}

static int batch_snapshot(struct top_run *r)
{
	struct sink *out = sink_file(stdout, 0);
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
	if (!err && r->v.gpu)
		err = top_gpu__update(&r->g, p, dt);
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

int cmd_top(int argc, char **argv)
{
	struct top_cli o;
	struct top_run r = { .o = &o };
	struct live_stats st;
	int err = parse_top_args(argc, argv, &o);

	if (err == 1) {
		top_usage(stdout);
		return 0;
	}
	if (err)
		return 2;
	r.v.sort = o.sort;
	if (top_model__init(&r.m))
		return 1;
	if (top_gpu__init(&r.g)) {
		top_model__free(&r.m);
		return 1;
	}
	if (o.gpu)
		r.v.gpu = &r.g;
	err = live_open(&o.rec, &r.s);
	if (!err && !o.batch) {
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
	return err ? 1 : 0;
}
