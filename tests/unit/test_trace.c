// SPDX-License-Identifier: MIT
#include "test_util.h"

#include "cli/cmds.h"
#include "output/trace.h"
#include "util/sink.h"

#define MS 1000000ull

static void add(struct profile *p, uint32_t pid, uint32_t tid, const char *comm, uint64_t ts,
		const uint32_t *locs, size_t n)
{
	int64_t node = profile__stack(p, locs, n);
	struct thread *t = profile__thread(p, pid, tid, true);
	struct sample s = { .ts = ts, .pid = pid, .tid = tid, .stack = (uint32_t)node, .weight = MS };

	assert_true(node >= 0);
	t->comm = profile__intern(p, comm);
	assert_int_equal(profile__add_sample(p, &s), 0);
}

/*
 * Thread 101 (1 ms samples): main;foo;bar at 10, 11, 12 ms, main;foo;baz at 13,
 * 14 ms, then off CPU until main;foo at 30 ms. Thread 201 of process 200: one
 * sample of main;outer[inl] at 11 ms. Samples are added out of time order.
 */
static struct profile *make(void)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1), f = test_loc(p, "/bin/app", "foo", NULL, 2),
		 b = test_loc(p, "/bin/app", "bar", NULL, 3), z = test_loc(p, "/lib/libz.so", "baz", NULL, 4),
		 i = test_loc(p, "/bin/app", "outer", "inl", 5);
	struct process *pr;

	add(p, 100, 101, "app", 12 * MS, (uint32_t[]){ m, f, b }, 3);
	add(p, 100, 101, "app", 10 * MS, (uint32_t[]){ m, f, b }, 3);
	add(p, 100, 101, "app", 11 * MS, (uint32_t[]){ m, f, b }, 3);
	add(p, 100, 101, "app", 13 * MS, (uint32_t[]){ m, f, z }, 3);
	add(p, 100, 101, "app", 14 * MS, (uint32_t[]){ m, f, z }, 3);
	add(p, 100, 101, "app", 30 * MS, (uint32_t[]){ m, f }, 2);
	add(p, 200, 201, "other", 11 * MS, (uint32_t[]){ m, i }, 2);
	pr = profile__proc(p, 100, true);
	pr->comm = profile__intern(p, "app");
	pr->cmdline = profile__intern(p, "/bin/app --flag");
	profile__set_meta(p, "sample_rate", "1000");
	profile__set_meta(p, "command", "/bin/app --flag");
	return p;
}

static char *render(struct profile *p, const struct trace_opts *o, struct trace_stats *st)
{
	struct sink *s = sink_mem();
	size_t len;
	char *out;

	assert_non_null(s);
	assert_int_equal(trace_write(s, p, o, st), 0);
	out = strdup(sink_mem_data(s, &len));
	assert_int_equal(sink_close(s), 0);
	return out;
}

static const char *must_find(const char *hay, const char *needle)
{
	const char *at = strstr(hay, needle);

	if (!at)
		fail_msg("not in the trace: %s\n---\n%s", needle, hay);
	return at;
}

static void test_slices_merge_and_nest(void **state)
{
	struct profile *p = make();
	struct trace_opts o = { 0 };
	struct trace_stats st;
	char *t = render(p, &o, &st);
	const char *mainx, *foox, *barx, *bazx;

	/* the run from 10 to 14 ms is one main and one foo; the sample at 30 ms stands alone */
	mainx = must_find(t, "\"ph\":\"X\",\"pid\":100,\"tid\":101,\"ts\":9000,\"dur\":5000,\"name\":\"main\",\"cat\":\"app\"}");
	foox = must_find(t, "\"ts\":9000,\"dur\":5000,\"name\":\"foo\"");
	barx = must_find(t, "\"ts\":9000,\"dur\":3000,\"name\":\"bar\"");
	bazx = must_find(t, "\"ts\":12000,\"dur\":2000,\"name\":\"baz\",\"cat\":\"libz.so\"}");
	must_find(t, "\"ts\":29000,\"dur\":1000,\"name\":\"main\"");
	must_find(t, "\"ts\":29000,\"dur\":1000,\"name\":\"foo\"");
	/* parents come before their children, so viewers nest them */
	assert_true(mainx < foox && foox < barx && barx < bazx);
	/* inline frames are slices of their own, inside their function */
	assert_true(must_find(t, "\"name\":\"outer\"") < must_find(t, "\"name\":\"inl\""));
	assert_int_equal(st.samples, 7);
	assert_int_equal(st.threads, 2);
	assert_int_equal(st.slices, 6 + 3);
	free(t);
	profile__free(p);
}

static void test_tracks_counters_lost(void **state)
{
	struct profile *p = make();
	struct trace_opts o = { 0 };
	char *t;

	p->stats[STAT_SAMPLES_LOST] = 5;
	t = render(p, &o, NULL);
	assert_memory_equal(t, "{\"traceEvents\":[", 16);
	must_find(t, "{\"ph\":\"M\",\"pid\":100,\"name\":\"process_name\",\"args\":{\"name\":\"app\"}}");
	must_find(t, "\"name\":\"process_labels\",\"args\":{\"labels\":\"/bin/app --flag\"}");
	must_find(t, "{\"ph\":\"M\",\"pid\":100,\"tid\":101,\"name\":\"thread_name\",\"args\":{\"name\":\"app\"}}");
	must_find(t, "\"tid\":201,\"name\":\"thread_name\",\"args\":{\"name\":\"other\"}}");
	/* process 200 has no process entry: named after its main thread or its pid */
	must_find(t, "{\"ph\":\"M\",\"pid\":200,\"name\":\"process_name\",\"args\":{\"name\":\"pid 200\"}}");
	/* the busier process sorts first */
	must_find(t, "\"pid\":100,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":0}}");
	/* CPU utilisation: 10 ms buckets from the first sample; 5 samples of 1 ms = 0.5 cores, 0 after the last */
	must_find(t, "{\"ph\":\"C\",\"pid\":100,\"ts\":10000,\"name\":\"CPU utilization\",\"args\":{\"cores\":0.5}}");
	must_find(t, "\"ph\":\"C\",\"pid\":100,\"ts\":20000,\"name\":\"CPU utilization\",\"args\":{\"cores\":0}}");
	must_find(t, "\"ph\":\"C\",\"pid\":100,\"ts\":30000,\"name\":\"CPU utilization\",\"args\":{\"cores\":0.1}}");
	must_find(t, "\"ph\":\"C\",\"pid\":100,\"ts\":40000,\"name\":\"CPU utilization\",\"args\":{\"cores\":0}}");
	must_find(t, "\"ph\":\"i\",\"pid\":100,\"tid\":100,\"ts\":30000,\"s\":\"g\",\"name\":\"samples lost (ring buffer full)\",\"args\":{\"samples_lost\":5");
	must_find(t, "\"otherData\":{\"producer\":\"eprof\",\"clock\":\"CLOCK_MONOTONIC\"");
	assert_string_equal(t + strlen(t) - 2, "}\n");
	free(t);

	o.no_counters = true;
	t = render(p, &o, NULL);
	assert_null(strstr(t, "\"ph\":\"C\""));
	free(t);
	profile__free(p);
}

static void test_filters(void **state)
{
	struct profile *p = make();
	struct trace_opts o = { .filter = { .t0 = 12 * MS, .t1 = 14 * MS } };
	struct trace_stats st;
	char *t = render(p, &o, &st);

	assert_int_equal(st.samples, 3);
	assert_int_equal(st.threads, 1);
	/* the window starts with the sample at 12 ms (covering 11..12) */
	must_find(t, "\"ts\":11000,\"dur\":3000,\"name\":\"main\"");
	assert_null(strstr(t, "\"tid\":201"));
	free(t);

	o = (struct trace_opts){ .filter = { .tid = 201 } };
	t = render(p, &o, &st);
	assert_int_equal(st.samples, 1);
	assert_null(strstr(t, "\"tid\":101"));
	free(t);
	profile__free(p);
}

/*
 * Recursion: main;a;f at 10 ms, then main;f;g at 11 ms. The f under a ends at
 * 10 ms where the f under main starts: that one starts 1 us later so that
 * viewers ordering same-time events by name do not nest it in the old one.
 */
static void test_same_name_boundary(void **state)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1), a = test_loc(p, "/bin/app", "a", NULL, 2),
		 f = test_loc(p, "/bin/app", "f", NULL, 3), g = test_loc(p, "/bin/app", "g", NULL, 4);
	char *t;

	add(p, 1, 1, "app", 10 * MS, (uint32_t[]){ m, a, f }, 3);
	add(p, 1, 1, "app", 11 * MS, (uint32_t[]){ m, f, g }, 3);
	t = render(p, &(struct trace_opts){ .no_counters = true }, NULL);
	must_find(t, "\"ts\":9000,\"dur\":2000,\"name\":\"main\"");
	must_find(t, "\"ts\":9000,\"dur\":1000,\"name\":\"a\"");
	must_find(t, "\"ts\":9000,\"dur\":1000,\"name\":\"f\"");
	must_find(t, "\"ts\":10001,\"dur\":999,\"name\":\"f\"");
	must_find(t, "\"ts\":10001,\"dur\":999,\"name\":\"g\"");
	free(t);
	profile__free(p);
}

static void test_empty_profile(void **state)
{
	struct profile *p = profile__new();
	struct trace_stats st;
	char *t = render(p, &(struct trace_opts){ 0 }, &st);

	assert_int_equal(st.events, 0);
	assert_true(!strncmp(t, "{\"traceEvents\":[\n],", 19));
	free(t);
	profile__free(p);
}

static void test_writer_events(void **state)
{
	struct sink *s = sink_mem();
	struct trace_writer *w = trace_writer__new(s);
	const char *series[] = { "a", "b" };
	double vals[] = { 1.5, 2 };
	size_t len;
	const char *t;

	trace_complete(w, 1, 2, 1500, 2000, "x\"y\n", "cat", "{\"k\":1}");
	trace_begin(w, 1, 2, 3000, "b", NULL, NULL);
	trace_end(w, 1, 2, 4000);
	trace_counter(w, 1, "mem", 5000, series, vals, 2);
	trace_instant(w, 1, 2, 6000, "bad\xff utf8", 't', NULL);
	trace_flow(w, 's', 7, 1, 2, 1600, "launch", NULL);
	trace_flow(w, 'f', 7, 1, 3, 8000, "launch", NULL);
	assert_int_equal(trace_writer__events(w), 7);
	assert_int_equal(trace_writer__finish(w, NULL), 0);
	t = sink_mem_data(s, &len);
	must_find(t, "{\"ph\":\"X\",\"pid\":1,\"tid\":2,\"ts\":1.5,\"dur\":2,\"name\":\"x\\\"y\\n\",\"cat\":\"cat\",\"args\":{\"k\":1}}");
	must_find(t, "{\"ph\":\"B\",\"pid\":1,\"tid\":2,\"ts\":3,\"name\":\"b\"}");
	must_find(t, "{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":4}");
	must_find(t, "{\"ph\":\"C\",\"pid\":1,\"ts\":5,\"name\":\"mem\",\"args\":{\"a\":1.5,\"b\":2}}");
	must_find(t, "\"s\":\"t\",\"name\":\"bad\\ufffd utf8\"}");
	must_find(t, "{\"ph\":\"s\",\"pid\":1,\"tid\":2,\"ts\":1.6,\"id\":7,\"name\":\"launch\",\"cat\":\"flow\"}");
	must_find(t, "{\"ph\":\"f\",\"pid\":1,\"tid\":3,\"ts\":8,\"id\":7,\"bp\":\"e\",\"name\":\"launch\"");
	assert_int_equal(sink_close(s), 0);
}

static void test_fmt_us(void **state)
{
	char b[32];

	trace_fmt_us(b, 0);
	assert_string_equal(b, "0");
	trace_fmt_us(b, 1000);
	assert_string_equal(b, "1");
	trace_fmt_us(b, 1234567);
	assert_string_equal(b, "1234.567");
	trace_fmt_us(b, 1500);
	assert_string_equal(b, "1.5");
	trace_fmt_us(b, 1050);
	assert_string_equal(b, "1.05");
	trace_fmt_us(b, 18446744073709551615ull);
	assert_string_equal(b, "18446744073709551.615");
}

static void test_trace_args_and_time_range(void **state)
{
	struct trace_cli o;
	struct time_range r;
	struct sample_filter f = { 0 };
	struct profile *p = profile__new();

	assert_int_equal(parse_trace_args(1, (char *[]){ "trace", NULL }, &o), 0);
	assert_string_equal(o.input, "eprof.data");
	assert_string_equal(o.output, "trace.json");
	assert_int_equal(parse_trace_args(6, (char *[]){ "trace", "x.data", "-o", "t.json",
							  "--time-range", "1.5:2", NULL },
					  &o),
			 0);
	assert_string_equal(o.input, "x.data");
	assert_true(o.range.has_from && o.range.has_to);
	assert_true(o.range.from_s == 1.5 && o.range.to_s == 2);
	assert_int_equal(parse_trace_args(2, (char *[]){ "trace", "--bogus", NULL }, &o), -EINVAL);
	assert_int_equal(parse_trace_args(2, (char *[]){ "trace", "-h", NULL }, &o), 1);

	assert_int_equal(parse_time_range(":3", &r), 0);
	assert_true(!r.has_from && r.has_to && r.to_s == 3);
	assert_int_equal(parse_time_range("2:", &r), 0);
	assert_true(r.has_from && !r.has_to);
	assert_int_equal(parse_time_range(":", &r), -EINVAL);
	assert_int_equal(parse_time_range("3", &r), -EINVAL);
	assert_int_equal(parse_time_range("3:2", &r), -EINVAL);
	assert_int_equal(parse_time_range("a:2", &r), -EINVAL);
	assert_int_equal(parse_time_range("-1:2", &r), -EINVAL);

	profile__set_meta(p, "start_ns", "5000000000");
	assert_int_equal(parse_time_range("1.5:2", &r), 0);
	time_range_apply(&r, p, &f);
	assert_int_equal(f.t0, 6500000000ull);
	assert_int_equal(f.t1, 7000000000ull);
	profile__free(p);
}

/*
 * Three samples of a 1,100-frame stack, 10 ms apart (off CPU between, so each opens every
 * frame): 1,024 root-side frames and one "[truncated]" slice each. A slice cap in the
 * options stops the samples that would pass it.
 */
static void test_deep_stack_cut_and_slice_cap(void **state)
{
	struct profile *p = profile__new();
	uint32_t locs[1100];
	struct trace_opts o = { 0 };
	struct trace_stats st;
	char name[16], *t;
	const char *at;
	size_t cuts = 0;

	(void)state;
	for (uint32_t i = 0; i < 1100; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		locs[i] = test_loc(p, "/bin/app", name, NULL, i + 1);
	}
	for (int k = 0; k < 3; k++)
		add(p, 100, 101, "app", (10 + 10 * (uint64_t)k) * MS, locs, 1100);
	profile__set_meta(p, "sample_rate", "1000");
	t = render(p, &o, &st);
	assert_int_equal(st.slices, 3 * 1025);
	for (at = t; (at = strstr(at, "\"name\":\"[truncated]\"")); at++)
		cuts++;
	assert_int_equal(cuts, 3);
	must_find(t, "\"name\":\"f1023\"");
	assert_null(strstr(t, "\"name\":\"f1024\""));
	free(t);

	o.max_slices = 2100; /* two samples' slices fit, not three */
	t = render(p, &o, &st);
	assert_int_equal(st.slices, 2 * 1025);
	assert_int_equal(st.samples, 3);
	free(t);
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slices_merge_and_nest),
		cmocka_unit_test(test_deep_stack_cut_and_slice_cap),
		cmocka_unit_test(test_tracks_counters_lost),
		cmocka_unit_test(test_filters),
		cmocka_unit_test(test_same_name_boundary),
		cmocka_unit_test(test_empty_profile),
		cmocka_unit_test(test_writer_events),
		cmocka_unit_test(test_fmt_us),
		cmocka_unit_test(test_trace_args_and_time_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
