// SPDX-License-Identifier: MIT
/* The job's processes: descendants of the targets found in /proc at attach. */
#include "test_util.h"

#include <signal.h>
#include <sys/wait.h>

#include "analysis/procs.h"
#include "output/html.h"
#include "output/report.h"
#include "record/proc.h"
#include "util/sink.h"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	fclose(f);
}

/* proc_root/PID/stat with that parent; the name holds a space and a ')' as real ones may. */
static void fake_proc(const char *root, unsigned pid, unsigned ppid)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 64], line[128];

	snprintf(dir, sizeof(dir), "%s/%u", root, pid);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/stat", dir);
	snprintf(line, sizeof(line), "%u (py worker) 1) S %u %u %u 0 -1\n", pid, ppid, pid, pid);
	write_file(path, line);
}

static bool has(const uint32_t *v, size_t n, uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == pid)
			return true;
	return false;
}

/*
 * A tree: 1 <- 10 (the job) <- 11, 12 (workers) <- 13 (a worker's child); 20 unrelated;
 * 30 (eprof itself) a child of 10 with its own child 31; a stray entry that is no process.
 */
static void test_descendants(void **state)
{
	const char *root = test_path("proc-tree");
	uint32_t roots[] = { 10 }, *d;
	size_t n;

	(void)state;
	mkdir(root, 0755);
	fake_proc(root, 1, 0);
	fake_proc(root, 10, 1);
	fake_proc(root, 11, 10);
	fake_proc(root, 12, 10);
	fake_proc(root, 13, 12);
	fake_proc(root, 20, 1);
	fake_proc(root, 30, 10);
	fake_proc(root, 31, 30);
	{
		char p[PATH_MAX + 32];

		snprintf(p, sizeof(p), "%s/self", root);
		mkdir(p, 0755);
	}
	assert_int_equal(proc_descendants(root, roots, 1, 30, &d, &n), 0);
	assert_int_equal(n, 3);
	assert_true(has(d, n, 11) && has(d, n, 12) && has(d, n, 13));
	/* breadth first: children before grandchildren */
	assert_int_equal(d[2], 13);
	free(d);

	/* Two roots, one the other's descendant: each pid once, roots left out. */
	{
		uint32_t two[] = { 12, 10 };

		assert_int_equal(proc_descendants(root, two, 2, 30, &d, &n), 0);
		assert_int_equal(n, 2);
		assert_true(has(d, n, 11) && has(d, n, 13) && !has(d, n, 12));
		free(d);
	}
	/* A leaf has none; a missing proc root is an error. */
	roots[0] = 13;
	assert_int_equal(proc_descendants(root, roots, 1, 0, &d, &n), 0);
	assert_int_equal(n, 0);
	free(d);
	assert_true(proc_descendants(test_path("no-such-proc"), roots, 1, 0, &d, &n) < 0);
}

/* The real /proc: this test process's own child is found, its parent's other children not. */
static void test_descendants_real(void **state)
{
	uint32_t self = getpid(), *d;
	size_t n;
	pid_t child = fork();

	(void)state;
	assert_true(child >= 0);
	if (!child) {
		pause();
		_exit(0);
	}
	assert_int_equal(proc_descendants(NULL, &self, 1, 0, &d, &n), 0);
	assert_true(has(d, n, (uint32_t)child));
	free(d);
	/* skip = the child: left out */
	assert_int_equal(proc_descendants(NULL, &self, 1, (uint32_t)child, &d, &n), 0);
	assert_false(has(d, n, (uint32_t)child));
	free(d);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

/* A job (pid 10: two threads) and its worker (pid 11, same comm, forked: same argv). */
static struct profile *job_profile(void)
{
	struct profile *p = profile__new();
	uint32_t loc[1];
	struct process *pr;

	assert_non_null(p);
	loc[0] = test_loc(p, "/usr/bin/python3", "work", NULL, 0x100);
	for (int i = 0; i < 10; i++) {
		struct sample s = { .ts = 1000 + i, .pid = i < 7 ? 10 : 11,
				    .tid = i < 7 ? 10 + 100 * (i & 1) : 11, .weight = 1000 };

		s.stack = profile__stack(p, loc, 1);
		assert_int_equal(profile__add_sample(p, &s), 0);
	}
	pr = profile__proc(p, 10, true);
	pr->ppid = 1;
	pr->comm = profile__intern(p, "python3");
	pr->cmdline = profile__intern(p, "/usr/bin/python3 train.py --workers 1");
	pr = profile__proc(p, 11, true);
	pr->ppid = 10;
	pr->comm = profile__intern(p, "python3");
	pr->cmdline = profile__intern(p, "/usr/bin/python3 train.py --workers 1");
	/* a process the file knows by name only */
	pr = profile__proc(p, 12, true);
	pr->comm = profile__intern(p, "kworker/0:1");
	{
		struct sample s = { .ts = 2000, .pid = 12, .tid = 12, .stack = 1, .weight = 1000 };

		assert_int_equal(profile__add_sample(p, &s), 0);
	}
	return p;
}

static void test_process_stats(void **state)
{
	struct profile *p = job_profile();
	struct proc_stat *v;
	struct sample_filter only11 = { .pid = 11 };
	char buf[64];
	size_t n;

	(void)state;
	assert_int_equal(process_stats(p, NULL, &v, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(v[0].pid, 10);
	assert_int_equal(v[0].samples, 7);
	assert_int_equal(v[0].threads, 2);
	assert_int_equal(v[0].weight, 7000);
	assert_int_equal(v[1].pid, 11);
	assert_int_equal(v[1].ppid, 10);
	assert_int_equal(v[1].threads, 1);
	assert_string_equal(proc_command(p, &v[1], buf, sizeof(buf)),
			    "/usr/bin/python3 train.py --workers 1");
	assert_string_equal(proc_command(p, &v[2], buf, sizeof(buf)), "[kworker/0:1]");
	free(v);
	assert_int_equal(process_stats(p, &only11, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].samples, 3);
	free(v);
	profile__free(p);
}

static void test_command_short(void **state)
{
	char b[32], tiny[8];

	(void)state;
	proc_command_short("/usr/bin/python3 /srv/a/train.py --epochs 3", b, sizeof(b));
	assert_string_equal(b, "python3 train.py --epochs");
	proc_command_short("torchrun --nproc-per-node=2 train.py", b, sizeof(b));
	assert_string_equal(b, "torchrun --nproc-per-node=2"); /* the next word does not fit */
	proc_command_short("  mpirun   -n 4 ./a.out ", b, sizeof(b));
	assert_string_equal(b, "mpirun -n 4");
	proc_command_short("/opt/averyveryverylongprogramname x", tiny, sizeof(tiny));
	assert_string_equal(tiny, "averyve");
	proc_command_short("a bcdefghij", tiny, sizeof(tiny));
	assert_string_equal(tiny, "a");
	proc_command_short("", b, sizeof(b));
	assert_string_equal(b, "");
	proc_command_short("/dir/", b, sizeof(b));
	assert_string_equal(b, "/dir/");
}

/* report: the processes table when there are several, or with --threads; JSON always. */
static void test_report_processes(void **state)
{
	struct profile *p = job_profile();
	struct report_opts o = { .limit = 0 };
	struct sink *s = sink_mem();
	const char *text, *row;

	(void)state;
	assert_int_equal(report_write(s, p, &o), 0);
	text = sink_mem_data(s, NULL);
	assert_non_null(strstr(text, "     PID     PPID   Samples       %  Threads  Command\n"));
	row = strstr(text, "      11       10         3   27.27        1  /usr/bin/python3 train.py "
			   "--workers 1\n");
	assert_non_null(row);
	assert_non_null(strstr(text, "      12        0         1    9.09        1  [kworker/0:1]\n"));
	sink_close(s);

	s = sink_mem();
	o.json = true;
	assert_int_equal(report_write(s, p, &o), 0);
	text = sink_mem_data(s, NULL);
	assert_non_null(strstr(text, "\"processes\": [\n    {\"pid\": 10, \"ppid\": 1, \"comm\": "
				     "\"python3\", \"cmdline\": \"/usr/bin/python3 train.py --workers "
				     "1\", \"command\": \"/usr/bin/python3 train.py --workers 1\", "
				     "\"samples\": 7, \"cpu_ns\": 7000, \"threads\": 2}"));
	sink_close(s);

	/* one process: no table unless --threads */
	o.json = false;
	o.hot.filter.pid = 10;
	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	assert_null(strstr(sink_mem_data(s, NULL), "PPID"));
	sink_close(s);
	o.threads = true;
	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	assert_non_null(strstr(sink_mem_data(s, NULL), "PPID"));
	sink_close(s);

	/* HTML: a Processes section with the command lines */
	s = sink_mem();
	assert_int_equal(html_write(s, p, &(struct html_opts){ .path = "x.data" }), 0);
	text = sink_mem_data(s, NULL);
	assert_non_null(strstr(text, "<a href=\"#processes\">Processes</a>"));
	assert_non_null(strstr(text, "id=\"processes-table\""));
	assert_non_null(strstr(strstr(text, "id=\"processes-table\""),
			       "/usr/bin/python3 train.py --workers 1"));
	sink_close(s);
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_process_stats),
		cmocka_unit_test(test_command_short),
		cmocka_unit_test(test_report_processes),
		cmocka_unit_test(test_descendants),
		cmocka_unit_test(test_descendants_real),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
