// SPDX-License-Identifier: MIT
#include "test_util.h"

#include <math.h>

#include "analysis/memory.h"
#include "output/report.h"
#include "output/report_mem.h"
#include "record/mem_probe.h"
#include "cli/cmds.h"
#include "record/record.h"
#include "util/json.h"
#include "util/sink.h"

static uint32_t s1, s2, s3;

static void ev(struct profile *p, uint16_t kind, uint64_t ts, uint32_t pid, uint64_t addr,
	       uint64_t size, uint64_t weight, uint32_t stack)
{
	struct event e = { .ts = ts, .pid = pid, .tid = pid, .kind = kind, .a = addr, .b = size,
			   .c = weight, .stack = stack };

	assert_int_equal(profile__add_event(p, &e), 0);
}

/*
 * pid 10, every allocation recorded (weight == size):
 *   t=1000    alloc 100 @0x10 (S1)
 *   t=2000    alloc 200 @0x20 (S2)
 *   t=2500    free 0x10              temporary (1.5 us)
 *   t=3000    alloc 300 @0x30 (S2)   live 500: the peak
 *   t=5 ms    free 0x30              not temporary
 *   t=6 ms    alloc 50 @0x10 (S1)    address reused
 *   t=7 ms    free 0x99              never recorded: ignored
 * pid 11: alloc 1000 @0x20 at 4000 (same address, other process), freed at 8 ms.
 * Events are added out of order: the analysis sorts them.
 */
static struct profile *make(void)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1), a = test_loc(p, "/bin/app", "a", NULL, 2),
		 b = test_loc(p, "/bin/app", "b", NULL, 3), c = test_loc(p, "/bin/app", "c", NULL, 4);

	s1 = profile__stack(p, (uint32_t[]){ m, a }, 2);
	s2 = profile__stack(p, (uint32_t[]){ m, b }, 2);
	s3 = profile__stack(p, (uint32_t[]){ m, c }, 2);
	profile__set_meta(p, "mem_sample_bytes", "1");
	ev(p, EVK_ALLOC, 2000, 10, 0x20, 200, 200, s2);
	ev(p, EVK_ALLOC, 1000, 10, 0x10, 100, 100, s1);
	ev(p, EVK_FREE, 2500, 10, 0x10, 100, 0, 0);
	ev(p, EVK_ALLOC, 3000, 10, 0x30, 300, 300, s2);
	ev(p, EVK_ALLOC, 4000, 11, 0x20, 1000, 1000, s3);
	ev(p, EVK_FREE, 5000000, 10, 0x30, 300, 0, 0);
	ev(p, EVK_ALLOC, 6000000, 10, 0x10, 50, 50, s1);
	ev(p, EVK_FREE, 7000000, 10, 0x99, 8, 0, 0);
	ev(p, EVK_FREE, 8000000, 11, 0x20, 1000, 0, 0);
	return p;
}

static const struct mem_group *group(const struct mem_group *g, size_t n, uint32_t stack)
{
	for (size_t i = 0; i < n; i++)
		if (g[i].stack == stack)
			return &g[i];
	return NULL;
}

static void test_peak_leaks_temps_one_pid(void **state)
{
	struct profile *p = make();
	struct mem_opts o = { .temp_ns = 1000000, .pid = 10 };
	struct mem_result r;

	(void)state;
	assert_int_equal(memory_analyze(p, &o, &r), 0);
	assert_int_equal(r.allocated_bytes, 650);
	assert_true(fabs(r.alloc_count - 4) < 1e-9);
	assert_int_equal(r.peak_bytes, 500);
	assert_int_equal(r.peak_ts, 3000);
	/* Live at the peak: S2 (200 + 300), nothing of S1 (freed before). */
	assert_int_equal(r.nat_peak, 1);
	assert_int_equal(r.at_peak[0].stack, s2);
	assert_int_equal(r.at_peak[0].bytes, 500);
	/* Leaks: 200 of S2 (from t=2000) and 50 of S1 (the reused address). */
	assert_int_equal(r.end_bytes, 250);
	assert_int_equal(r.nleaks, 2);
	assert_int_equal(r.leaks[0].stack, s2);
	assert_int_equal(r.leaks[0].bytes, 200);
	assert_int_equal(r.leaks[0].first_ts, 2000);
	assert_int_equal(r.leaks[1].stack, s1);
	assert_int_equal(r.leaks[1].bytes, 50);
	/* Temporaries: only the 100 bytes freed after 1.5 us. */
	assert_int_equal(r.temp_bytes, 100);
	assert_int_equal(r.ntemps, 1);
	assert_int_equal(r.temps[0].stack, s1);
	/* Allocated by stack: S2 500 in 2 calls, S1 150 in 2 calls. */
	assert_int_equal(r.nallocated, 2);
	assert_int_equal(r.allocated[0].stack, s2);
	assert_int_equal(group(r.allocated, r.nallocated, s1)->bytes, 150);
	assert_true(fabs(group(r.by_count, r.nallocated, s1)->count - 2) < 1e-9);
	mem_result__free(&r);
	profile__free(p);
}

static void test_processes_apart(void **state)
{
	struct profile *p = make();
	struct mem_opts o = { .temp_ns = 1000000 };
	struct mem_result r;

	(void)state;
	/* Same address in two processes: pid 11's block does not free pid 10's. */
	assert_int_equal(memory_analyze(p, &o, &r), 0);
	assert_int_equal(r.allocated_bytes, 1650);
	assert_int_equal(r.peak_bytes, 1500); /* 200 + 300 + 1000 at t=4000 */
	assert_int_equal(r.peak_ts, 4000);
	assert_int_equal(r.end_bytes, 250);
	assert_null(group(r.leaks, r.nleaks, s3));
	assert_int_equal(group(r.at_peak, r.nat_peak, s3)->bytes, 1000);
	mem_result__free(&r);
	profile__free(p);
}

static void test_sampled_weights(void **state)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1);
	uint32_t s = profile__stack(p, (uint32_t[]){ m }, 1);
	struct mem_opts o = { 0 };
	struct mem_result r;

	(void)state;
	profile__set_meta(p, "mem_sample_bytes", "524288");
	/* A sampled 100-byte block stands for 1000 bytes: 10 calls. */
	ev(p, EVK_ALLOC, 10, 1, 0x1000, 100, 1000, s);
	ev(p, EVK_ALLOC, 20, 1, 0x2000, 100, 1000, s);
	ev(p, EVK_FREE, 30, 1, 0x1000, 100, 0, 0);
	assert_int_equal(memory_analyze(p, &o, &r), 0);
	assert_int_equal(r.sample_bytes, 524288);
	assert_int_equal(r.allocated_bytes, 2000);
	assert_true(fabs(r.alloc_count - 20) < 1e-9);
	assert_int_equal(r.peak_bytes, 2000);
	assert_int_equal(r.end_bytes, 1000);
	assert_true(fabs(r.leaks[0].count - 10) < 1e-9);
	assert_int_equal(r.temp_bytes, 1000); /* freed 20 ns after: under the 1 ms default */
	mem_result__free(&r);
	profile__free(p);
}

static void test_timeline_and_views(void **state)
{
	struct profile *p = make();
	struct mem_point *pts;
	size_t n;
	uint64_t max = 0, sum = 0;

	(void)state;
	assert_int_equal(memory_timeline(p, 10, &pts, &n), 0);
	assert_int_equal(n, 7);
	for (size_t i = 0; i < n; i++)
		max = pts[i].bytes > max ? pts[i].bytes : max;
	assert_int_equal(max, 500);
	assert_int_equal(pts[n - 1].bytes, 250);
	assert_int_equal(pts[2].ts, 2500);
	assert_int_equal(pts[2].bytes, 200);
	free(pts);
	/* All processes in one pass: each process's points are its own timeline. */
	{
		struct mem_point *all, *one;
		uint32_t *pid_of;
		size_t na, n1, k = 0;

		assert_int_equal(memory_timeline_by_pid(p, 0, &all, &pid_of, &na), 0);
		assert_int_equal(na, 9);
		for (uint32_t pid = 10; pid <= 11; pid++) {
			assert_int_equal(memory_timeline(p, pid, &one, &n1), 0);
			assert_int_equal(n1, pid == 10 ? 7 : 2);
			k = 0;
			for (size_t i = 0; i < na; i++) {
				if (pid_of[i] != pid)
					continue;
				assert_true(k < n1);
				assert_int_equal(all[i].ts, one[k].ts);
				assert_int_equal(all[i].bytes, one[k].bytes);
				k++;
			}
			assert_int_equal(k, n1);
			free(one);
		}
		free(all);
		free(pid_of);
	}
	/* A process with pid 0 has its own track (pid 0 is no "every process" there). */
	{
		struct profile *q = profile__new();
		struct mem_point *all;
		uint32_t *pid_of;
		size_t na;

		ev(q, EVK_ALLOC, 10, 0, 0x10, 100, 100, 0);
		ev(q, EVK_ALLOC, 20, 1, 0x10, 1000, 1000, 0);
		assert_int_equal(memory_timeline_by_pid(q, 0, &all, &pid_of, &na), 0);
		assert_int_equal(na, 2);
		assert_int_equal(pid_of[0], 0);
		assert_int_equal(all[0].bytes, 100);
		assert_int_equal(pid_of[1], 1);
		assert_int_equal(all[1].bytes, 1000);
		free(all);
		free(pid_of);
		profile__free(q);
	}
	/* Leaks as samples: the flamegraph --leaks input (both processes). */
	assert_int_equal(memory_to_samples(p, MEM_VIEW_LEAKS), 0);
	for (size_t i = 0; i < p->samples.n; i++)
		sum += p->samples.v[i].weight;
	assert_int_equal(sum, 250);
	profile__free(p);
	p = make();
	assert_int_equal(memory_to_samples(p, MEM_VIEW_PEAK), 0);
	sum = 0;
	for (size_t i = 0; i < p->samples.n; i++)
		sum += p->samples.v[i].weight;
	assert_int_equal(sum, 1500);
	profile__free(p);
	p = profile__new();
	assert_int_equal(memory_to_samples(p, MEM_VIEW_ALLOCATED), -ENOENT);
	profile__free(p);
}

static void test_report_json(void **state)
{
	struct profile *p = make();
	struct sink *s = sink_mem();
	const char *out;

	(void)state;
	assert_int_equal(report_mem_json(s, p, NULL, 0), 0);
	out = sink_mem_data(s, NULL);
	assert_non_null(strstr(out, "\"memory\": {"));
	assert_non_null(strstr(out, "\"peak_bytes\": 1500"));
	assert_non_null(strstr(out, "\"allocated_bytes\": 1650"));
	assert_non_null(strstr(out, "\"leaks\": [\n      {\"bytes\": 200, \"count\": 1, "));
	assert_non_null(strstr(out, "\"stack\": [\"b\", \"main\"]"));
	sink_close(s);
	s = sink_mem();
	assert_int_equal(report_mem_text(s, p, NULL, 0), 0);
	out = sink_mem_data(s, NULL);
	assert_non_null(strstr(out, "Not freed by the end (leaks) by stack (leaf first)\n"));
	assert_non_null(strstr(out, "b <- main"));
	sink_close(s);
	profile__free(p);
	/* No memory data: nothing written. */
	p = profile__new();
	s = sink_mem();
	assert_int_equal(report_mem_json(s, p, NULL, 0), 0);
	assert_string_equal(sink_mem_data(s, NULL), "");
	sink_close(s);
	profile__free(p);
}

/* The "stack" member the memory and I/O sections share: leaf first, a nameless frame as "?",
 * a name from the target escaped. */
static void test_report_json_stack(void **state)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1);
	uint32_t u = test_loc(p, "/bin/app", "", NULL, 2);
	uint32_t x = test_loc(p, "/bin/app", "x\x01<\"y\">\xff", NULL, 3);
	uint32_t st = profile__stack(p, (uint32_t[]){ m, u, x }, 3);
	struct json j;

	(void)state;
	json_init(&j, NULL, 0);
	json_obj(&j);
	report_json_stack(&j, p, st);
	report_json_stack(&j, p, 0);
	json_obj_end(&j);
	assert_string_equal(json_text(&j), "{\"stack\": [\"x\\u0001<\\\"y\\\">\\ufffd\", "
					   "\"?\", \"main\"], \"stack\": []}");
	profile__free(p);
}

static void test_probe_offset(void **state)
{
	/* glibc 2.36 free: test %rdi,%rdi; je ...: probe the je (emulated), rdi intact. */
	static const uint8_t free_code[] = { 0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55 };
	/* malloc: push %r12 first: emulated at the start. */
	static const uint8_t malloc_code[] = { 0x41, 0x54, 0x55, 0x53 };
	/* memalign: cmpb $0,x(%rip); je: the je. */
	static const uint8_t memalign_code[] = { 0x80, 0x3d, 0x71, 0x0e, 0x14, 0, 0, 0x74, 0x07 };
	/* endbr64; push %rbp */
	static const uint8_t endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x55 };
	/* mov %rdi,%rax writes a register: stay at the start. */
	static const uint8_t mov[] = { 0x48, 0x89, 0xf8, 0x55 };
	/* test then something unknown: the start. */
	static const uint8_t unknown[] = { 0x48, 0x85, 0xff, 0x48, 0x89, 0xf8 };

	(void)state;
	assert_int_equal(mem_probe_offset(free_code, sizeof(free_code)), 3);
	assert_int_equal(mem_probe_offset(malloc_code, sizeof(malloc_code)), 0);
	assert_int_equal(mem_probe_offset(memalign_code, sizeof(memalign_code)), 7);
	assert_int_equal(mem_probe_offset(endbr, sizeof(endbr)), 4);
	assert_int_equal(mem_probe_offset(mov, sizeof(mov)), 0);
	assert_int_equal(mem_probe_offset(unknown, sizeof(unknown)), 0);
	/* Cut short: never read past the end. */
	assert_int_equal(mem_probe_offset(free_code, 4), 0);
	assert_int_equal(mem_probe_offset(free_code, 0), 0);
}

static void test_probe_find(void **state)
{
	struct mem_probe_set set;
	char *path = test_path("notelf");
	FILE *f = fopen(path, "w");

	(void)state;
	assert_non_null(f);
	fputs("not an ELF file\n", f);
	fclose(f);
	assert_int_equal(mem_probe_find(path, &set), 0);
	assert_int_equal(set.n, 0);
	assert_int_equal(mem_probe_find(test_path("missing"), &set), -ENOENT);
	/* The C library this test runs on exports malloc and free. */
	if (access("/lib/x86_64-linux-gnu/libc.so.6", R_OK) == 0) {
		assert_int_equal(mem_probe_find("/lib/x86_64-linux-gnu/libc.so.6", &set), 0);
		assert_true(set.n >= 2);
		assert_true(set.free_idx >= 0);
		assert_int_equal(set.cookies[set.free_idx], MEM_FREE);
		assert_true(set.offsets[set.free_idx] > 0);
	}
}

static void test_probe_named(void **state)
{
	const char *const names[] = { "free", "no_such_function_here", "malloc" };
	const char *const many[MEM_PROBE_NAMED_MAX + 1] = { "free" };
	uint64_t offs[MEM_PROBE_NAMED_MAX + 1];
	struct mem_probe_set set;
	char *path = test_path("notelf2");
	FILE *f = fopen(path, "w");

	(void)state;
	assert_non_null(f);
	fputs("not an ELF file\n", f);
	fclose(f);
	assert_int_equal(mem_probe_named(path, names, 3, offs), 0);
	assert_true(offs[0] == 0 && offs[1] == 0 && offs[2] == 0);
	assert_int_equal(mem_probe_named(test_path("missing"), names, 3, offs), -ENOENT);
	assert_int_equal(mem_probe_named(path, many, MEM_PROBE_NAMED_MAX + 1, offs), -EINVAL);
	if (access("/lib/x86_64-linux-gnu/libc.so.6", R_OK) != 0)
		return;
	/* The offsets mem_probe_find gives, less the bytes it skips; unknown names get 0. */
	assert_int_equal(mem_probe_named("/lib/x86_64-linux-gnu/libc.so.6", names, 3, offs), 2);
	assert_int_equal(offs[1], 0);
	assert_int_equal(mem_probe_find("/lib/x86_64-linux-gnu/libc.so.6", &set), 0);
	for (int i = 0; i < set.n; i++) {
		if (set.cookies[i] == MEM_FREE)
			assert_int_equal(offs[0], set.offsets[i] - set.skipped[i]);
		if (set.cookies[i] == MEM_MALLOC)
			assert_int_equal(offs[2], set.offsets[i] - set.skipped[i]);
	}
}

static void test_weight(void **state)
{
	(void)state;
	assert_int_equal(mem_sample_weight(100, 1), 100);
	assert_int_equal(mem_sample_weight(0, 524288), 0);
	/* size == mean: sampled with p = 1 - 1/e. */
	assert_int_equal(mem_sample_weight(524288, 524288), (uint64_t)llround(524288 / (1 - exp(-1))));
	/* Tiny blocks stand for about the mean; huge ones for themselves. */
	assert_true(llabs((long long)mem_sample_weight(8, 524288) - 524292) <= 1);
	assert_int_equal(mem_sample_weight(1ULL << 40, 524288), 1ULL << 40);
}

static void test_record_opts(void **state)
{
	struct record_opts o;
	char *a1[] = { "record", "--mem", "-p", "1", NULL };
	char *a2[] = { "record", "--mem=1", "-p", "1", NULL };
	char *a3[] = { "record", "--mem=0", "-p", "1", NULL };
	char *a4[] = { "record", "-p", "1", NULL };

	(void)state;
	assert_int_equal(parse_record_args(4, a1, &o), 0);
	assert_int_equal(o.mem_sample, 524288);
	assert_int_equal(parse_record_args(4, a2, &o), 0);
	assert_int_equal(o.mem_sample, 1);
	assert_int_equal(parse_record_args(4, a3, &o), -EINVAL);
	assert_int_equal(parse_record_args(3, a4, &o), 0);
	assert_int_equal(o.mem_sample, 0);
}

/*
 * Anonymous mappings against a model that keeps one bit per page: random mmaps (also
 * over live ones, as MAP_FIXED), munmaps that cut holes, mremap pairs and a process
 * exit, in three processes sharing addresses; then mappings at the top of the address
 * space, whose end is saturated.
 */
#define MODEL_PAGES 256

static uint64_t model_take(bool *pages, uint64_t a, uint64_t b)
{
	uint64_t n = 0;

	for (uint64_t pg = a / 4096; pg < MODEL_PAGES && pg < (a + b + 4095) / 4096; pg++) {
		n += pages[pg];
		pages[pg] = false;
	}
	return n * 4096;
}

static void test_mappings_model(void **state)
{
	static bool pages[4][MODEL_PAGES];
	struct profile *p = profile__new();
	struct mem_opts o = { .temp_ns = 1000000 };
	struct mem_result r;
	uint64_t rng = 7, mapped = 0, peak = 0, peak_ts = 0, mmap_bytes = 0, munmap_bytes = 0;
	uint64_t moved = 0;
	struct process *exiting;
	bool exited = false;

	(void)state;
	memset(pages, 0, sizeof(pages));
	profile__set_meta(p, "mem_sample_bytes", "1");
	exiting = profile__proc(p, 2, true);
	exiting->exit_ts = 20005; /* after event 2000: pid 2's mappings go, later ones count anew */
	for (uint64_t i = 1; i <= 4000; i++) {
		uint64_t ts = i * 10, x, pid, a, b;
		struct event e;

		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		x = rng >> 33;
		pid = 1 + x % 3;
		a = (x >> 2) % (MODEL_PAGES - 16) * 4096;
		b = (1 + (x >> 10) % 16) * 4096 - (x >> 16) % 4096;
		if (ts > exiting->exit_ts && !exited) {
			mapped -= model_take(pages[2], 0, MODEL_PAGES * 4096);
			exited = true;
		}
		e = (struct event){ .ts = ts, .pid = (uint32_t)pid, .tid = (uint32_t)pid, .a = a, .b = b };
		switch ((x >> 28) % 8) {
		case 0: case 1: case 2: case 3: /* mmap */
			e.kind = EVK_MMAP;
			mmap_bytes += b;
			moved = 0;
			mapped -= model_take(pages[pid], a, b);
			for (uint64_t pg = a / 4096; pg < (a + b + 4095) / 4096; pg++)
				pages[pid][pg] = true;
			mapped += (b + 4095) / 4096 * 4096;
			break;
		case 4: case 5: /* munmap */
			e.kind = EVK_MUNMAP;
			x = model_take(pages[pid], a, b);
			mapped -= x;
			munmap_bytes += x;
			break;
		default: /* mremap: the old place goes, the new one counts if the old was mapped */
			e.kind = EVK_MUNMAP;
			e.flags = MEM_F_REMAP;
			moved = model_take(pages[pid], a, b);
			mapped -= moved;
			assert_int_equal(profile__add_event(p, &e), 0);
			e = (struct event){ .ts = ts + 1, .pid = (uint32_t)pid, .tid = (uint32_t)pid,
					    .kind = EVK_MMAP, .flags = MEM_F_REMAP,
					    .a = (a + 40 * 4096) % ((MODEL_PAGES - 16) * 4096), .b = b };
			if (moved) {
				mapped -= model_take(pages[pid], e.a, b);
				for (uint64_t pg = e.a / 4096; pg < (e.a + b + 4095) / 4096; pg++)
					pages[pid][pg] = true;
				mapped += (b + 4095) / 4096 * 4096;
				ts++;
			}
			moved = 0;
			break;
		}
		assert_int_equal(profile__add_event(p, &e), 0);
		if (mapped > peak) {
			peak = mapped;
			peak_ts = ts;
		}
	}
	assert_int_equal(memory_analyze(p, &o, &r), 0);
	assert_true(peak > 100 * 4096); /* the sequence does exercise overlaps */
	assert_int_equal(r.mapped_peak, peak);
	assert_int_equal(r.mapped_peak_ts, peak_ts);
	assert_int_equal(r.mapped_end, mapped);
	assert_int_equal(r.mmap_bytes, mmap_bytes);
	assert_int_equal(r.munmap_bytes, munmap_bytes);
	mem_result__free(&r);

	/* At the top of the address space: the end saturates, an unmap takes it all back. */
	struct event top = { .ts = 50000, .pid = 9, .tid = 9, .kind = EVK_MMAP,
			     .a = UINT64_MAX - 8191, .b = 1 << 20 };

	assert_int_equal(profile__add_event(p, &top), 0);
	top.ts++;
	top.kind = EVK_MUNMAP;
	top.a += 4096;
	top.b = UINT64_MAX;
	assert_int_equal(profile__add_event(p, &top), 0);
	assert_int_equal(memory_analyze(p, &o, &r), 0);
	assert_int_equal(r.mapped_end, mapped + 4096);
	assert_int_equal(r.munmap_bytes, munmap_bytes + 4095);
	mem_result__free(&r);
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peak_leaks_temps_one_pid),
		cmocka_unit_test(test_processes_apart),
		cmocka_unit_test(test_mappings_model),
		cmocka_unit_test(test_sampled_weights),
		cmocka_unit_test(test_timeline_and_views),
		cmocka_unit_test(test_report_json),
		cmocka_unit_test(test_report_json_stack),
		cmocka_unit_test(test_probe_offset),
		cmocka_unit_test(test_probe_find),
		cmocka_unit_test(test_probe_named),
		cmocka_unit_test(test_weight),
		cmocka_unit_test(test_record_opts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
