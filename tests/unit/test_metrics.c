// SPDX-License-Identifier: MIT
/* Resource metrics: the analysis of the counter series, the report's lines, the trace's tracks. */
#include "test_util.h"

#include "analysis/metrics.h"
#include "model/event.h"
#include "output/report_metrics.h"
#include "output/trace.h"
#include "record/kbtf.h"
#include "util/sink.h"

#include <bpf/btf.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#define MS 1000000ull

static void counter(struct profile *p, uint64_t ts, uint32_t pid, uint32_t index, int m, uint64_t v)
{
	struct event e = {.ts = ts, .kind = EVK_COUNTER, .pid = pid};

	e.name = profile__intern(p, metric_defs[m].name);
	ev_set_counter_at(&e, index, v);
	assert_int_equal(profile__add_event(p, &e), 0);
}

/*
 * Process 10 attached mid-life (its totals start high), process 20 started during the record
 * (its series opens with 0) and gone at 300 ms (RSS 0 then); a RAPL zone at 10 W and a region
 * [100, 200) ms. Events are added out of time order.
 */
static struct profile *make(void)
{
	struct profile *p = profile__new();

	profile__set_meta(p, "metrics_interval_ms", "100");
	profile__set_meta(p, "metrics_scope", "process");
	profile__set_meta(p, "start_ns", "0");
	profile__set_meta(p, "end_ns", "400000000");
	profile__set_meta(p, "energy_source", "rapl-powercap");
	profile__set_meta(p, "energy_zone_0", "package-0 intel-rapl:0");
	counter(p, 200 * MS, 10, 0, MET_CPU_USER, 5000 * MS);
	counter(p, 100 * MS, 10, 0, MET_CPU_USER, 4900 * MS);
	counter(p, 400 * MS, 10, 0, MET_CPU_USER, 5100 * MS);
	counter(p, 100 * MS, 10, 0, MET_MINFLT, 1000);
	counter(p, 400 * MS, 10, 0, MET_MINFLT, 1500);
	counter(p, 100 * MS, 10, 0, MET_RSS_ANON, 100 << 20);
	counter(p, 100 * MS, 10, 0, MET_RSS_PEAK, 300 << 20);
	counter(p, 50 * MS, 20, 0, MET_CPU_USER, 0);
	counter(p, 100 * MS, 20, 0, MET_CPU_USER, 50 * MS);
	counter(p, 200 * MS, 20, 0, MET_CPU_USER, 150 * MS);
	counter(p, 100 * MS, 20, 0, MET_RSS_ANON, 50 << 20);
	counter(p, 200 * MS, 20, 0, MET_RSS_ANON, 80 << 20);
	counter(p, 300 * MS, 20, 0, MET_RSS_ANON, 0);
	counter(p, 50 * MS, 20, 0, MET_NET_TCP_TX, 0);
	counter(p, 200 * MS, 20, 0, MET_NET_TCP_TX, 4096);
	for (uint64_t t = 0; t <= 400; t += 100)
		counter(p, t * MS, 0, 0, MET_ENERGY_UJ, t * 10000); /* 10 W */
	{
		struct event r = {.ts = 100 * MS, .dur = 100 * MS, .kind = EVK_REGION, .tid = 10};

		r.name = profile__intern(p, "step");
		assert_int_equal(profile__add_event(p, &r), 0);
	}
	return p;
}

static void test_analyze(void **state)
{
	struct profile *p = make();
	struct metrics_result r;

	(void)state;
	assert_int_equal(metrics_analyze(p, 0, &r), 0);
	assert_true(r.present);
	assert_int_equal(r.nprocs, 2);
	assert_int_equal(r.procs[0].pid, 10);
	/* running totals: what happened while recording */
	assert_int_equal(metric_delta(&r.procs[0].m[MET_CPU_USER]), 200 * MS);
	assert_int_equal(metric_delta(&r.procs[1].m[MET_CPU_USER]), 150 * MS);
	assert_int_equal(r.total[MET_CPU_USER], 350 * MS);
	assert_int_equal(r.total[MET_MINFLT], 500);
	assert_int_equal(r.total[MET_NET_TCP_TX], 4096);
	/* RSS: both processes together peaked at 180 MiB; 20's last RSS while it ran was 80 */
	assert_int_equal(r.rss_peak_all, 180 << 20);
	assert_int_equal(r.rss_peak, 300 << 20);
	assert_int_equal(r.rss_final, (100 << 20) + (80 << 20));
	/* 4 J from the zone, 1 J of it in the region */
	assert_int_equal(r.nzones, 1);
	assert_true(r.cpu_joules > 3.999 && r.cpu_joules < 4.001);
	assert_true(metrics_energy_between(p, 100 * MS, 200 * MS) > 0.999);
	metrics_result__free(&r);
	/* one process */
	assert_int_equal(metrics_analyze(p, 20, &r), 0);
	assert_int_equal(r.nprocs, 1);
	assert_int_equal(r.total[MET_CPU_USER], 150 * MS);
	metrics_result__free(&r);
	profile__free(p);
}

static void test_grid(void **state)
{
	struct profile *p = make();
	double v[4];

	(void)state;
	/*
	 * CPU user, per interval up to each reading: 50 ms (20) in (0,100], 100 + 100 in
	 * (100,200], nothing, 100 in (300,400]; 10's first reading counts from itself
	 */
	assert_int_equal(metrics_grid(p, MET_CPU_USER, 0, 0, 0, 100 * MS, 4, v), 0);
	assert_true(v[0] == 50e6 && v[1] == 200e6 && v[2] == 0 && v[3] == 100e6);
	/* RSS anon at each bin's end, summed: (100+50), (100+80), 100 + 0, 100 MiB */
	assert_int_equal(metrics_grid(p, MET_RSS_ANON, 0, 0, 0, 100 * MS, 4, v), 0);
	assert_true(v[0] == 150.0 * (1 << 20) && v[1] == 180.0 * (1 << 20) &&
		    v[2] == 100.0 * (1 << 20) && v[3] == 100.0 * (1 << 20));
	profile__free(p);
}

static bool near(double a, double b)
{
	return a > b - 1e-3 * (b > 1 ? b : 1) && a < b + 1e-3 * (b > 1 ? b : 1);
}

/*
 * A thread at one core read with the poll's jitter (95, 205, 300 ms): each bin gets 100 ms,
 * where whole readings per bin gave 95, 0, 205 (two readings in one bin: "2 cores"). A
 * reading after a gap of unchanged ones puts its growth in the last interval only.
 */
static void test_grid_jitter_and_threads(void **state)
{
	struct profile *p = profile__new();
	struct event e = {.kind = EVK_COUNTER, .pid = 30};
	static const uint64_t ts[] = {0, 95, 205, 300, 600}, cpu[] = {0, 95, 205, 300, 350};
	double v[6];

	(void)state;
	profile__set_meta(p, "metrics_interval_ms", "100");
	e.name = profile__intern(p, metric_defs[MET_T_CPU_USER].name);
	for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
		e.ts = ts[i] * MS;
		ev_set_counter_at(&e, 31, cpu[i] * MS);
		assert_int_equal(profile__add_event(p, &e), 0);
		/* another thread of the same process, not in thread 31's grid */
		ev_set_counter_at(&e, 32, 7 * cpu[i] * MS);
		assert_int_equal(profile__add_event(p, &e), 0);
	}
	assert_int_equal(metrics_grid(p, MET_T_CPU_USER, 30, 31, 0, 100 * MS, 6, v), 0);
	assert_true(near(v[0], 100e6) && near(v[1], 100e6) && near(v[2], 100e6));
	/* 300 -> 600 ms: unchanged readings at 400 and 500, then 50 ms more by 600 */
	assert_true(v[3] == 0 && v[4] == 0 && near(v[5], 50e6));
	assert_int_equal(metrics_grid(p, MET_T_CPU_USER, 30, 32, 0, 100 * MS, 6, v), 0);
	assert_true(near(v[0], 700e6));
	/* a recorder that closes flat steps (it would have written 300 at 500 ms): a gap is
	 * a late reading, its growth spread over all of it */
	profile__set_meta(p, "metrics_steps", "closed");
	assert_int_equal(metrics_grid(p, MET_T_CPU_USER, 30, 31, 0, 100 * MS, 6, v), 0);
	assert_true(near(v[3], 50e6 / 3) && near(v[4], 50e6 / 3) && near(v[5], 50e6 / 3));
	profile__free(p);
}

static char *render_text(struct profile *p, bool json)
{
	struct metrics_result r;
	struct sink *s = sink_mem();
	char *out;

	assert_int_equal(metrics_analyze(p, 0, &r), 0);
	if (json) {
		sink_puts(s, "{\"x\": 1");
		assert_int_equal(report_metrics_json(s, p, &r, 100), 0);
		sink_puts(s, "}");
	} else {
		report_metrics_text(s, p, &r, 0, 10);
	}
	out = strdup(sink_mem_data(s, NULL));
	sink_close(s);
	metrics_result__free(&r);
	return out;
}

static void test_report(void **state)
{
	struct profile *p = make();
	char *t = render_text(p, false), *j;

	(void)state;
	assert_non_null(strstr(t, "# metrics:  wall 0.40 s   CPU user 0.35 s   sys 0.00 s"));
	assert_non_null(strstr(t, "RSS peak 180.0 MiB   final 180.0 MiB   (2 processes"));
	assert_non_null(strstr(t, "network sent 4.0 KiB"));
	assert_non_null(strstr(t, "# energy:   CPU 4.0 J (package-0 intel-rapl:0 4.0 J)"));
	assert_non_null(strstr(t, "445 g/kWh, world average"));
	assert_non_null(strstr(t, "# energy by region: step 1.0 J (1 calls, 0.10 s)"));
	j = render_text(p, true);
	assert_non_null(strstr(j, "\"carbon_intensity_g_per_kwh\": 100.0"));
	assert_non_null(strstr(j, "\"net_tcp_tx_bytes\": 4096"));
	free(t);
	free(j);
	/* no energy counter: said, with no figure */
	profile__set_meta(p, "energy_source", "none");
	for (size_t i = 0; i < p->events.n; i++)
		if (!strcmp(profile__str(p, p->events.v[i].name), "energy_uj"))
			p->events.v[i].kind = EVK_LOST; /* out of the way */
	t = render_text(p, false);
	assert_non_null(strstr(t, "# energy:   not available: no RAPL energy counter"));
	assert_null(strstr(t, "carbon"));
	free(t);
	profile__free(p);
}

static void test_no_metrics(void **state)
{
	struct profile *p = profile__new();
	struct metrics_result r;
	char *t;

	(void)state;
	assert_int_equal(metrics_analyze(p, 0, &r), 0);
	assert_false(r.present);
	metrics_result__free(&r);
	t = render_text(p, false);
	assert_string_equal(t, "");
	free(t);
	profile__free(p);
}

static void test_throttle_names(void **state)
{
	char buf[128];

	(void)state;
	assert_string_equal(metrics_throttle_names(0x4 | 0x40, buf, sizeof(buf)),
			    "power cap, hardware thermal");
	assert_string_equal(metrics_throttle_names(0, buf, sizeof(buf)), "");
	assert_string_equal(metrics_throttle_names(1ULL << 40, buf, sizeof(buf)), "bit 40");
	assert_int_equal(metric_by_name("nvcsw"), MET_NVCSW);
	assert_int_equal(metric_by_name("rss_bytes"), -1);
}

/* The network tracepoints' check (record/kbtf.c): names in a BTF file's string table. */
static void test_kbtf(void **state)
{
	static const char strs[] = "\0int\0btf_trace_sock_send_length\0my_btf_trace_x\0";
	const char *const names[] = { "btf_trace_sock_send_length", "btf_trace_x", "int", "in" };
	struct {
		uint16_t magic;
		uint8_t version, flags;
		uint32_t hdr_len, type_off, type_len, str_off, str_len;
	} h = { 0xeB9F, 1, 0, 24, 0, 4, 4, sizeof(strs) };
	char *path = test_path("btf");
	bool found[4];
	FILE *f;

	(void)state;
	assert_true(kbtf_strtab_has(strs, sizeof(strs), "int"));
	assert_true(kbtf_strtab_has(strs, sizeof(strs), "my_btf_trace_x"));
	assert_false(kbtf_strtab_has(strs, sizeof(strs), "btf_trace_x")); /* a suffix */
	assert_false(kbtf_strtab_has(strs, sizeof(strs), "btf_trace_sock")); /* a prefix */
	assert_false(kbtf_strtab_has(strs, sizeof(strs), ""));
	assert_false(kbtf_strtab_has(strs, 10, "btf_trace_sock_send_length")); /* cut off */
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(&h, sizeof(h), 1, f), 1);
	assert_int_equal(fwrite("\0\0\0\0", 4, 1, f), 1); /* the type section */
	assert_int_equal(fwrite(strs, sizeof(strs), 1, f), 1);
	fclose(f);
	assert_int_equal(kbtf_has_names(path, names, 4, found), 0);
	assert_true(found[0] && !found[1] && found[2] && !found[3]);
	/* a string table past the end of the file, a wrong magic */
	h.str_len = sizeof(strs) + 1;
	f = fopen(path, "r+b");
	assert_non_null(f);
	assert_int_equal(fwrite(&h, sizeof(h), 1, f), 1);
	fclose(f);
	assert_int_equal(kbtf_has_names(path, names, 4, found), -EINVAL);
	assert_false(found[0]);
	assert_int_equal(kbtf_has_names(test_path("missing"), names, 4, found), -ENOENT);
	/* On the running kernel: the answer libbpf's full parse gives. */
	if (access(KBTF_VMLINUX, R_OK) == 0) {
		const char *const tp[] = { "btf_trace_sock_send_length", "btf_trace_sched_switch" };
		struct btf *btf = btf__load_vmlinux_btf();

		assert_non_null(btf);
		assert_int_equal(kbtf_has_names(KBTF_VMLINUX, tp, 2, found), 0);
		for (int i = 0; i < 2; i++)
			assert_int_equal(found[i],
					 btf__find_by_name_kind(btf, tp[i], BTF_KIND_TYPEDEF) > 0);
		assert_true(found[1]);
		btf__free(btf);
	}
}

/*
 * A reading right after another (the final figures at exit just after a poll): one 10 ms tick
 * of /proc's CPU time over 3 ms must not read as 3.3 cores of one thread in the trace.
 */
static void test_trace_short_interval(void **state)
{
	struct profile *p = profile__new();
	struct trace_opts o = { 0 };
	struct trace_stats st = { 0 };
	struct sink *s = sink_mem();
	const char *out, *at;
	double top = 0;

	(void)state;
	profile__set_meta(p, "metrics_interval_ms", "100");
	counter(p, 0, 30, 0, MET_CPU_SYS, 0);
	counter(p, 100 * MS, 30, 0, MET_CPU_SYS, 50 * MS);
	counter(p, 200 * MS, 30, 0, MET_CPU_SYS, 100 * MS);
	counter(p, 203 * MS, 30, 0, MET_CPU_SYS, 110 * MS);
	assert_int_equal(trace_write(s, p, &o, &st), 0);
	out = sink_mem_data(s, NULL);
	for (at = out; (at = strstr(at, "\"name\":\"CPU system (cores)\",\"args\":{\"value\":"));) {
		double v;

		at = strchr(at, ':');
		at = strchr(at + 1, ':');
		at = strchr(at + 1, ':') + 1;
		v = strtod(at, NULL);
		top = v > top ? v : top;
	}
	/* 0.5 cores, then 60 ms over the last 103 ms */
	if (top < 0.45 || top > 0.65)
		fail_msg("top CPU system reading %.3f cores:\n%s", top, out);
	sink_close(s);
	profile__free(p);
}

/*
 * The thread CPU split (test_metrics.py's per-thread test failed under load): a thread that
 * ran 109 ms on a busy machine with no tick yet must not have that kept as user time; ticks
 * then split its run time, no part going down between readings; the final reading is the
 * ratio of all ticks, as getrusage says; a thread that ends with no tick is all user time.
 */
static void test_cpu_split(void **state)
{
	struct cpu_split c = {0};

	(void)state;
	/* no tick in two readings: nothing is split yet */
	cpu_split_update(&c, 0, 0, 34 * MS, false);
	cpu_split_update(&c, 0, 0, 109 * MS, false);
	assert_int_equal(c.user, 0);
	assert_int_equal(c.sys, 0);
	/* the first ticks, 1 user to 3 system: the whole run time in that ratio */
	cpu_split_update(&c, 4 * MS, 12 * MS, 160 * MS, false);
	assert_int_equal(c.user, 40 * MS);
	assert_int_equal(c.sys, 120 * MS);
	/* the ratio moves to 1:1: the system part may not go down, the user part takes the rest */
	cpu_split_update(&c, 20 * MS, 20 * MS, 200 * MS, false);
	assert_int_equal(c.sys, 120 * MS);
	assert_int_equal(c.user, 80 * MS);
	/* then to 3:1: the user part grows, the system part stays */
	cpu_split_update(&c, 90 * MS, 30 * MS, 300 * MS, false);
	assert_int_equal(c.user, 180 * MS);
	assert_int_equal(c.sys, 120 * MS);
	/* a reading that is not newer changes nothing */
	cpu_split_update(&c, 95 * MS, 25 * MS, 300 * MS, false);
	assert_int_equal(c.user, 180 * MS);
	/* the final reading: all ticks' ratio, 3:1, the system part steps down */
	cpu_split_update(&c, 90 * MS, 30 * MS, 320 * MS, true);
	assert_int_equal(c.user, 240 * MS);
	assert_int_equal(c.sys, 80 * MS);

	/* no tick at the end (it exited, or the recording ended): all user, as the kernel says */
	c = (struct cpu_split){0};
	cpu_split_update(&c, 0, 0, 3 * MS, false);
	assert_int_equal(c.user + c.sys, 0);
	cpu_split_update(&c, 0, 0, 5 * MS, true);
	assert_int_equal(c.user, 5 * MS);
	assert_int_equal(c.sys, 0);
	/* only system ticks: all system */
	c = (struct cpu_split){0};
	cpu_split_update(&c, 0, 4 * MS, 50 * MS, false);
	assert_int_equal(c.sys, 50 * MS);
	assert_int_equal(c.user, 0);
}

/* A thread's user part stepping down at its final reading: the grids of the two parts still
 * add up to its CPU time in each interval (the HTML chart sums them). */
static void test_grid_cpu_step(void **state)
{
	struct profile *p = profile__new();
	double u[3], s[3];

	(void)state;
	profile__set_meta(p, "metrics_interval_ms", "100");
	counter(p, 0, 30, 31, MET_T_CPU_USER, 0);
	counter(p, 0, 30, 31, MET_T_CPU_SYS, 0);
	counter(p, 100 * MS, 30, 31, MET_T_CPU_USER, 60 * MS);
	counter(p, 100 * MS, 30, 31, MET_T_CPU_SYS, 20 * MS);
	counter(p, 200 * MS, 30, 31, MET_T_CPU_USER, 50 * MS);
	counter(p, 200 * MS, 30, 31, MET_T_CPU_SYS, 120 * MS);
	assert_int_equal(metrics_grid(p, MET_T_CPU_USER, 30, 31, 0, 100 * MS, 3, u), 0);
	assert_int_equal(metrics_grid(p, MET_T_CPU_SYS, 30, 31, 0, 100 * MS, 3, s), 0);
	assert_true(fabs(u[0] + s[0] - 80 * MS) < 1);
	assert_true(fabs(u[1] + s[1] - 90 * MS) < 1);
	assert_true(fabs(u[1] + 10 * MS) < 1);
	assert_true(fabs(u[2] + s[2]) < 1);
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_analyze),	   cmocka_unit_test(test_grid),
	    cmocka_unit_test(test_grid_jitter_and_threads),
	    cmocka_unit_test(test_report),	   cmocka_unit_test(test_no_metrics),
	    cmocka_unit_test(test_throttle_names),
	    cmocka_unit_test(test_trace_short_interval),
	    cmocka_unit_test(test_kbtf),
	    cmocka_unit_test(test_cpu_split),	   cmocka_unit_test(test_grid_cpu_step),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
