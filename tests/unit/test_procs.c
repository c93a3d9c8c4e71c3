// SPDX-License-Identifier: MIT
/* The job's processes: descendants of the targets found in /proc at attach. */
#include "test_util.h"

#include <signal.h>
#include <sys/wait.h>

#include "record/proc.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_descendants),
		cmocka_unit_test(test_descendants_real),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
