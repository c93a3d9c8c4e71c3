// SPDX-License-Identifier: MIT
#include "test_util.h"

#include "analysis/findings.h"
#include "analysis/io.h"
#include "analysis/stacks.h"
#include "cli/cmds.h"
#include "model/io_event.h"
#include "record/record.h"

static uint32_t s1, s2;

static void io(struct profile *p, uint32_t tid, uint64_t ts, uint64_t dur, unsigned call,
	       unsigned type, const char *file, uint64_t bytes, uint32_t stack)
{
	struct event e = { .ts = ts, .dur = dur, .pid = 10, .tid = tid, .kind = EVK_IO,
			   .stack = stack, .name = profile__intern(p, file) };

	ev_set_io(&e, call, type, stack == 0, bytes, 3);
	assert_int_equal(profile__add_event(p, &e), 0);
}

/*
 * pid 10, record 0..2 s:
 *   tid 10 reads /data/a 3 times on s1 (100, 200, 300 bytes, 100 ms each) and sends 50 bytes
 *          to tcp 1.2.3.4:80 on s2 (1 ms); CPU samples until 1.9 s: it computes mostly.
 *   tid 11 reads /data/b (4096 bytes, 900 ms) without a stack, from 0.1 s to 1.0 s: reads
 *          are all its time.
 */
static struct profile *make(void)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1), a = test_loc(p, "/bin/app", "load", NULL, 2),
		 b = test_loc(p, "/bin/app", "send", NULL, 3);
	struct sample s = { .pid = 10, .tid = 10, .weight = 1000000 };

	s1 = profile__stack(p, (uint32_t[]){ m, a }, 2);
	s2 = profile__stack(p, (uint32_t[]){ m, b }, 2);
	profile__set_meta(p, "io", "syscalls");
	profile__set_meta(p, "start_ns", "1");
	profile__set_meta(p, "end_ns", "2000000000");
	profile__thread(p, 10, 10, true)->comm = profile__intern(p, "main");
	profile__thread(p, 10, 11, true)->comm = profile__intern(p, "loader");
	io(p, 10, 10000000, 100000000, IOC_READ, IOT_FILE, "/data/a", 100, s1);
	io(p, 10, 200000000, 100000000, IOC_PREAD, IOT_FILE, "/data/a", 200, s1);
	io(p, 10, 400000000, 100000000, IOC_READ, IOT_FILE, "/data/a", 300, s1);
	io(p, 10, 500000000, 1000000, IOC_SENDTO, IOT_SOCKET, "tcp 1.2.3.4:80", 50, s2);
	io(p, 11, 100000000, 900000000, IOC_READ, IOT_PIPE, "/data/b", 4096, 0);
	for (uint64_t t = 0; t < 1900000000; t += 10000000) {
		s.ts = t;
		s.stack = s1;
		assert_int_equal(profile__add_sample(p, &s), 0);
	}
	return p;
}

static void test_analyze(void **state)
{
	struct profile *p = make();
	struct io_result r;

	(void)state;
	assert_int_equal(io_analyze(p, NULL, &r), 0);
	assert_true(r.present);
	assert_int_equal(r.calls, 5);
	assert_int_equal(r.read_calls, 4);
	assert_int_equal(r.read_bytes, 4096 + 600);
	assert_int_equal(r.write_bytes, 50);
	assert_int_equal(r.no_stack, 1);
	/* by bytes: /data/b (no stack), /data/a on s1, the socket on s2 */
	assert_int_equal(r.nstacks, 3);
	assert_int_equal(r.by_bytes[0].stack, 0);
	assert_int_equal(r.by_bytes[1].stack, s1);
	assert_int_equal(r.by_bytes[1].read_bytes, 600);
	assert_int_equal(r.by_bytes[1].calls, 3);
	assert_int_equal(r.by_bytes[1].read_ns, 300000000);
	assert_false(r.by_bytes[2].input);
	assert_string_equal(profile__str(p, r.by_bytes[2].name), "tcp 1.2.3.4:80");
	/* by time: /data/b's 900 ms first */
	assert_int_equal(r.by_time[0].read_ns, 900000000);
	assert_int_equal(r.nfiles, 3);
	assert_string_equal(profile__str(p, r.files[0].name), "/data/b");
	assert_int_equal(r.files[0].type, IOT_PIPE);
	/* threads by read time: the loader first, reading all its span */
	assert_int_equal(r.nthreads, 2);
	assert_int_equal(r.threads[0].tid, 11);
	assert_int_equal(r.threads[0].last_ts - r.threads[0].first_ts, 900000000);
	assert_string_equal(profile__str(p, r.threads[0].top_name), "/data/b");
	/* tid 10's span runs to its last CPU sample */
	assert_int_equal(r.threads[1].last_ts - r.threads[1].first_ts, 1890000000);
	io_result__free(&r);
	/* a thread filter */
	assert_int_equal(io_analyze(p, &(struct sample_filter){ .tid = 10 }, &r), 0);
	assert_int_equal(r.calls, 4);
	io_result__free(&r);
	profile__free(p);
}

static void test_to_samples(void **state)
{
	struct profile *p = make();
	const struct frame *fr[8];
	uint64_t total = 0;

	(void)state;
	assert_int_equal(io_to_samples(p, IO_WEIGHT_BYTES, NULL), 0);
	assert_int_equal(p->samples.n, 5);
	for (size_t i = 0; i < p->samples.n; i++)
		total += p->samples.v[i].weight;
	assert_int_equal(total, 4096 + 600 + 50);
	/* the leaf names the direction and the file, under the calling stack */
	assert_int_equal(stack_frames(p, p->samples.v[0].stack, fr, 8, NULL), 3);
	assert_string_equal(profile__str(p, fr[2]->name), "[read] /data/a");
	assert_string_equal(profile__str(p, fr[1]->name), "load");
	assert_int_equal(stack_frames(p, p->samples.v[4].stack, fr, 8, NULL), 1);
	assert_string_equal(profile__str(p, fr[0]->name), "[read] /data/b");
	profile__free(p);

	p = make();
	assert_int_equal(io_to_samples(p, IO_WEIGHT_TIME, &(struct sample_filter){ .tid = 11 }), 0);
	assert_int_equal(p->samples.n, 1);
	assert_int_equal(p->samples.v[0].weight, 900000000);
	profile__free(p);

	p = profile__new();
	assert_int_equal(io_to_samples(p, IO_WEIGHT_BYTES, NULL), -ENOENT);
	profile__free(p);
}

static void test_slow_input_finding(void **state)
{
	struct profile *p = make();
	struct sample_filter f = { 0 };
	struct findings fs;
	int n = 0;

	(void)state;
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	for (size_t i = 0; i < fs.n; i++) {
		if (strcmp(fs.v[i].id, "slow-input"))
			continue;
		n++;
		/* the loader, not main (300 ms of reads in 1.89 s) */
		assert_non_null(strstr(fs.v[i].what, "loader (tid 11)"));
		assert_non_null(strstr(fs.v[i].what, "/data/b"));
		assert_int_equal(fs.v[i].severity, FINDING_MEDIUM);
	}
	assert_int_equal(n, 1);
	findings__free(&fs);
	profile__free(p);
}

static void test_cli(void **state)
{
	struct record_opts ro;
	struct flamegraph_cli fo;

	(void)state;
	assert_int_equal(parse_record_args(5, (char *[]){ "record", "--io-stack-rate", "7", "--",
							  "true", NULL },
					   &ro),
			 0);
	assert_true(ro.io);
	assert_int_equal(ro.io_stack_rate, 7);
	assert_int_equal(parse_record_args(4, (char *[]){ "record", "--io", "--", "true", NULL }, &ro),
			 0);
	assert_int_equal(ro.io_stack_rate, 5000);
	assert_int_equal(parse_flamegraph_args(2, (char *[]){ "flamegraph", "--io-time", NULL }, &fo),
			 0);
	assert_int_equal(fo.weights, FG_IO_TIME);
	assert_int_equal(parse_flamegraph_args(2, (char *[]){ "flamegraph", "--io", NULL }, &fo), 0);
	assert_int_equal(fo.weights, FG_IO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_analyze),
		cmocka_unit_test(test_to_samples),
		cmocka_unit_test(test_slow_input_finding),
		cmocka_unit_test(test_cli),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
