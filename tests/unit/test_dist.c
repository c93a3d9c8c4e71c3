// SPDX-License-Identifier: MIT
/* Jobs of many ranks: the collective tables, merging recordings, waits and the straggler. */
#include "test_util.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "analysis/diff_gate.h"
#include "analysis/diff_job.h"
#include "analysis/ranks.h"
#include "model/event.h"
#include "model/merge.h"
#include "record/collective.h"

static void test_collective_tables(void **state)
{
	size_t n;
	const struct coll_fn *f;

	assert_int_equal(coll_family_of("/usr/lib/x86_64-linux-gnu/libmpi.so.40"), COLL_MPI);
	assert_int_equal(coll_family_of("libmpich.so.12"), COLL_MPI);
	assert_int_equal(coll_family_of("/opt/nccl/lib/libnccl.so.2"), COLL_NCCL);
	assert_int_equal(coll_family_of("/lib/libgloo.so.0"), COLL_GLOO);
	assert_int_equal(coll_family_of("/lib/libmpifort.so"), COLL_NONE);
	assert_int_equal(coll_family_of("libncclx.so"), COLL_NONE);
	/* MPI_Reduce's communicator is its 7th argument (on the stack on x86-64) */
	f = coll_fns(COLL_MPI, &n);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(f[i].sym, "MPI_Reduce"))
			assert_true(f[i].count == 3 && f[i].type == 4 && f[i].comm == 7 &&
				    f[i].collective);
	/* NCCL's enum, MPICH's handles (size in bits 8-15 of builtins) */
	assert_int_equal(coll_nccl_type_size(7), 4); /* ncclFloat32 */
	assert_int_equal(coll_nccl_type_size(9), 2); /* ncclBfloat16 */
	assert_int_equal(coll_nccl_type_size(99), 0);
	assert_int_equal(coll_mpich_type_size(0x4c000405), 4); /* MPI_INT */
	assert_int_equal(coll_mpich_type_size(0x4c00080b), 8); /* MPI_DOUBLE */
	assert_int_equal(coll_mpich_type_size(0x7f0012345678ULL), 0); /* a pointer */
	assert_int_equal(coll_mpich_type_size(0x8c000405), 0);		 /* not a builtin */
	(void)state;
}

/* A rank's recording: metadata, and one sample + allreduce region per arrival. */
static struct profile *rank_file(int rank, const char *host, int64_t real_minus_mono,
				 const uint64_t *arrive, const uint64_t *leave, int n)
{
	struct profile *p = profile__new();
	char buf[64];
	int64_t obj = profile__object(p, OBJ_ELF, "/bin/app", "", 0);
	int64_t loc = profile__location(p, (uint32_t)obj, 0x1000);
	int64_t node = profile__stack_child(p, 0, (uint32_t)loc);
	struct frame *f = vec_push(p->frames);

	f->name = profile__intern(p, "compute");
	f->module = profile__intern(p, "app");
	f->kind = FRAME_USER;
	p->locations.v[loc].frame_first = (uint32_t)p->frames.n - 1;
	p->locations.v[loc].frame_n = 1;

	snprintf(buf, sizeof(buf), "%d", rank);
	profile__set_meta(p, "rank", buf);
	profile__set_meta(p, "world_size", "3");
	profile__set_meta(p, "hostname", host);
	profile__set_meta(p, "clock_monotonic_ns", "1000000000");
	snprintf(buf, sizeof(buf), "%" PRId64, 1700000000000000000 + 1000000000 + real_minus_mono);
	profile__set_meta(p, "clock_realtime_ns", buf);
	profile__set_meta(p, "start_ns", "1000000000");
	profile__set_meta(p, "end_ns", "9000000000");
	profile__proc(p, 100, true)->comm = profile__intern(p, "app");
	for (int k = 0; k < n; k++) {
		struct event e = { .kind = EVK_REGION, .pid = 100, .tid = 100,
				   .ts = arrive[k], .dur = leave[k] - arrive[k],
				   .name = profile__intern(p, "MPI_Allreduce"),
				   .flags = EVF_REGION_COLL | EVF_REGION_COMM };
		struct sample s = { .ts = arrive[k] - 1000, .pid = 100, .tid = 100,
				    .stack = (uint32_t)node, .weight = 1000000 };

		ev_set_region_comm(&e, 4096, 1);
		assert_int_equal(profile__add_event(p, &e), 0);
		assert_int_equal(profile__add_sample(p, &s), 0);
	}
	return p;
}

static void test_waits_straggler_clocks(void **state)
{
	/* rank 2 arrives 10 ms after rank 0 and 4 ms after rank 1 at each of 4 allreduces; all
	 * leave at once. Rank 1 is on another host whose monotonic clock is 7 s ahead of rank
	 * 0's and whose realtime mapping is off by 3 ms on top. */
	const uint64_t ms = 1000000, skew = 7000 * ms;
	uint64_t a0[4], l0[4], a1[4], l1[4], a2[4], l2[4];
	struct profile *p[3];
	char *paths[3] = { "r0", "r1", "r2" };
	struct job_summary s;

	for (int k = 0; k < 4; k++) {
		uint64_t t = 2000 * ms + k * 100 * ms;

		a0[k] = t, l0[k] = t + 12 * ms;
		a1[k] = t + 6 * ms + skew, l1[k] = t + 12 * ms + skew;
		a2[k] = t + 10 * ms, l2[k] = t + 12 * ms;
	}
	p[0] = rank_file(0, "a", 0, a0, l0, 4);
	p[1] = rank_file(1, "b", -(int64_t)skew + 3 * ms, a1, l1, 4);
	p[2] = rank_file(2, "a", 0, a2, l2, 4);
	assert_int_equal(job_analyze(p, paths, 3, &s), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.matched, 4);
	assert_int_equal(s.unmatched, 0);
	assert_int_equal(s.nmissing, 0);
	assert_true(s.mixed_hosts && !s.mixed_jobs);
	/* the 3 ms found from the collective ends and taken off */
	assert_true(s.ranks[1].correction_ns == -3 * (int64_t)ms);
	assert_int_equal(s.ranks[0].correction_ns, 0);
	/* exact waits: 10 ms and 4 ms per instance */
	assert_true(fabs(s.ranks[0].wait_s - 0.040) < 1e-9);
	assert_true(fabs(s.ranks[1].wait_s - 0.016) < 1e-9);
	assert_true(fabs(s.ranks[2].wait_s) < 1e-9);
	assert_int_equal(s.straggler, 2);
	assert_true(s.straggler_share == 1.0);
	assert_true(fabs(s.others_wait_s - 0.056) < 1e-9);
	assert_string_equal(s.straggler_func, "compute");
	assert_int_equal(s.nops, 1);
	assert_int_equal(s.ops[0].instances, 4);
	assert_int_equal(s.ops[0].bytes, 4096);
	/* the path: from rank 0's end (9 s) back to its last allreduce's end, that allreduce
	 * from rank 2's arrival, rank 2's work between allreduces, rank 2 back to its start */
	{
		struct job_path jp;

		assert_int_equal(job_path(&s, &jp), 0);
		assert_true(fabs(jp.ranks[0].compute_s - (9.0 - 2.312)) < 1e-9);
		assert_true(fabs(jp.ranks[2].compute_s - (3 * 0.098 + 1.010)) < 1e-9);
		/* each allreduce from its last arrival to its end, on the rank the path is on */
		assert_true(fabs(jp.ranks[2].comm_s - 3 * 0.002) < 1e-9);
		assert_true(fabs(jp.ranks[0].comm_s - 0.002) < 1e-9);
		assert_true(jp.ranks[1].compute_s == 0 && jp.ranks[1].comm_s == 0);
		assert_int_equal(jp.t1 - jp.t0, 8000 * (int64_t)ms);
		assert_string_equal(jp.ranks[2].func, "compute");
		assert_string_equal(jp.segs[1].coll, "MPI_Allreduce");
		assert_int_equal(jp.segs[1].seq, 4);
		job_path_free(&jp);
	}
	job_summary_free(&s);
	for (int i = 0; i < 3; i++)
		profile__free(p[i]);
	(void)state;
}

static void test_missing_rank_no_straggler(void **state)
{
	const uint64_t a[2] = { 2000000000, 2100000000 }, l[2] = { 2001000000, 2101000000 };
	struct profile *p[2] = { rank_file(0, "a", 0, a, l, 2), rank_file(2, "a", 0, a, l, 1) };
	char *paths[2] = { "r0", "r2" };
	struct job_summary s;

	assert_int_equal(job_analyze(p, paths, 2, &s), 0);
	assert_int_equal(s.nmissing, 1);
	assert_int_equal(s.missing[0], 1);
	assert_int_equal(s.matched, 1);	  /* rank 2's file ends after one allreduce */
	assert_int_equal(s.unmatched, 1);
	assert_int_equal(s.straggler, -1); /* no waits, and too few instances: none made up */
	job_summary_free(&s);
	profile__free(p[0]);
	profile__free(p[1]);
	(void)state;
}

static void test_merge(void **state)
{
	const uint64_t a[1] = { 2000000000 }, l[1] = { 2001000000 };
	struct profile *x = rank_file(0, "a", 0, a, l, 1), *y = rank_file(1, "b", 0, a, l, 1);
	struct profile *d = profile__new();
	struct merge_opts mx = { .proc_prefix = "rank 0 (a) ", .thread_name = "a/rank 0" };
	struct merge_opts my = { .ts_shift = -500, .proc_prefix = "rank 1 (b) " };
	uint32_t next = 0;

	profile__thread(x, 100, 100, true)->comm = profile__intern(x, "main");
	profile__thread(y, 100, 100, true)->comm = profile__intern(y, "main");
	assert_int_equal(profile_merge(d, x, &mx, &next), 0);
	assert_int_equal(next, 1);
	my.id_base = next;
	assert_int_equal(profile_merge(d, y, &my, &next), 0);
	assert_int_equal(next, 2);
	/* both pid 100s kept apart, named by rank */
	assert_int_equal(d->procs.n, 2);
	assert_string_equal(profile__str(d, profile__proc(d, 1, false)->comm), "rank 0 (a) app");
	assert_string_equal(profile__str(d, profile__proc(d, 2, false)->comm), "rank 1 (b) app");
	assert_string_equal(profile__str(d, profile__thread(d, 1, 1, false)->comm), "a/rank 0");
	assert_string_equal(profile__str(d, profile__thread(d, 2, 2, false)->comm), "main");
	/* samples and events: ids, times, stacks and names carried over */
	assert_int_equal(d->samples.n, 2);
	assert_int_equal(d->samples.v[1].pid, 2);
	assert_int_equal(d->samples.v[1].ts, a[0] - 1000 - 500);
	assert_int_equal(d->samples.v[0].stack, d->samples.v[1].stack); /* one "compute" node */
	assert_int_equal(d->events.n, 2);
	assert_int_equal(d->events.v[1].ts, a[0] - 500);
	assert_string_equal(profile__str(d, d->events.v[1].name), "MPI_Allreduce");
	assert_int_equal(ev_region_bytes(&d->events.v[1]), 4096);
	profile__free(d);
	profile__free(x);
	profile__free(y);
	(void)state;
}

/* Two runs of a 3-rank job: the straggler moves from rank 2 to rank 1, whose compute grew. */
static void test_diff_job(void **state)
{
	const uint64_t ms = 1000000;
	uint64_t t[4], l[4], late[4];
	struct profile *b[3], *n[2];
	char *bp[3] = { "b0", "b1", "b2" }, *np[2] = { "n0", "n1" };
	struct job_summary sb, sn;
	struct diff_job d;
	struct diff_kinds k = { 0 };
	struct diff_result r = { 0 };
	struct diff_gate g;
	const struct diff_rank *rk;
	char err[256];

	for (int i = 0; i < 4; i++) {
		t[i] = 2000 * ms + i * 100 * ms;
		late[i] = t[i] + 10 * ms;
		l[i] = t[i] + 12 * ms;
	}
	b[0] = rank_file(0, "a", 0, t, l, 4);
	b[1] = rank_file(1, "a", 0, t, l, 4);
	b[2] = rank_file(2, "a", 0, late, l, 4);
	n[0] = rank_file(0, "a", 0, t, l, 4);
	n[1] = rank_file(1, "a", 0, late, l, 4);
	/* rank 1 computes 5 ms more in NEW */
	for (int i = 0; i < 5; i++) {
		struct sample s = n[1]->samples.v[0];

		assert_int_equal(profile__add_sample(n[1], &s), 0);
	}
	assert_int_equal(job_analyze(b, bp, 3, &sb), 0);
	assert_int_equal(job_analyze(n, np, 2, &sn), 0);
	assert_int_equal(diff_job(&sb, &sn, &d), 0);

	assert_int_equal(d.run[0].recordings, 3);
	assert_int_equal(d.run[1].recordings, 2);
	assert_int_equal(d.run[0].straggler, 2);
	assert_int_equal(d.run[1].straggler, 1);
	assert_string_equal(d.run[1].straggler_func, "compute");
	assert_true(fabs(d.run[0].wait_s - 0.080) < 1e-9); /* ranks 0 and 1: 10 ms x 4 */
	assert_true(fabs(d.run[1].wait_s - 0.040) < 1e-9); /* rank 0 only */
	assert_int_equal(d.n, 3);
	/* rank 1: in communication 48 ms -> 8 ms, so its work grew 40 ms; its compute 4 -> 9 ms */
	rk = diff_job_rank(&d, 1);
	assert_non_null(rk);
	assert_true(rk->in[0] && rk->in[1]);
	assert_true(fabs(rk->comm_s[0] - 0.048) < 1e-9 && fabs(rk->comm_s[1] - 0.008) < 1e-9);
	assert_true(fabs(rk->wait_s[0] - 0.040) < 1e-9 && fabs(rk->wait_s[1]) < 1e-9);
	assert_int_equal(rk->last[1], 4);
	assert_string_equal(rk->func, "compute");
	assert_false(rk->func_self); /* the path its growth is blamed on */
	assert_true(fabs(rk->func_s[0] - 0.004) < 1e-9 && fabs(rk->func_s[1] - 0.009) < 1e-9);
	assert_ptr_equal(&d.ranks[d.slowest], rk);
	/* rank 0 ran the same: nothing grew, and no self time changed either */
	rk = diff_job_rank(&d, 0);
	assert_true(rk && rk->func_self && !rk->func[0]);
	/* rank 2 has no recording in NEW: said, not paired with another */
	rk = diff_job_rank(&d, 2);
	assert_true(rk && rk->in[0] && !rk->in[1] && !rk->func[0]);
	assert_int_equal(d.ncolls, 1);
	assert_string_equal(d.colls[0].name, "MPI_Allreduce");
	assert_int_equal(d.colls[0].instances[0], 4);
	assert_int_equal(d.colls[0].instances[1], 4);

	/* the gates on the job */
	k.job = &d;
	assert_int_equal(diff_gate_parse("rank:1.work>+30ms", &g, err, sizeof(err)), 0);
	assert_int_equal(diff_gate_eval(&g, &r, &k, err, sizeof(err)), 0);
	assert_true(g.failed && fabs(g.change - 40 * 1e6) < 1);
	assert_int_equal(diff_gate_parse("rank:1.work>+50ms", &g, err, sizeof(err)), 0);
	assert_int_equal(diff_gate_eval(&g, &r, &k, err, sizeof(err)), 0);
	assert_false(g.failed);
	assert_int_equal(diff_gate_parse("job.wait<-40%", &g, err, sizeof(err)), 0);
	assert_int_equal(diff_gate_eval(&g, &r, &k, err, sizeof(err)), 0);
	assert_true(g.failed && fabs(g.change + 50) < 1e-6); /* 80 -> 40 ms: -50% */
	assert_int_equal(diff_gate_parse("rank:2.wall>+1%", &g, err, sizeof(err)), 0);
	assert_int_equal(diff_gate_eval(&g, &r, &k, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no rank 2 in both runs"));
	assert_int_equal(diff_gate_parse("rank:1.speed>+1%", &g, err, sizeof(err)), -EINVAL);
	k.job = NULL; /* two single recordings */
	assert_int_equal(diff_gate_parse("job.wait>+1%", &g, err, sizeof(err)), 0);
	assert_int_equal(diff_gate_eval(&g, &r, &k, err, sizeof(err)), -ENOENT);

	diff_job__free(&d);
	job_summary_free(&sb);
	job_summary_free(&sn);
	for (int i = 0; i < 3; i++)
		profile__free(b[i]);
	profile__free(n[0]);
	profile__free(n[1]);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collective_tables),
		cmocka_unit_test(test_waits_straggler_clocks),
		cmocka_unit_test(test_missing_rank_no_straggler),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_diff_job),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
