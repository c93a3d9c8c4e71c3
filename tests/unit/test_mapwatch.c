// SPDX-License-Identifier: MIT
/*
 * record/mapwatch.c against the kernel: what the features skip (an unchanged process) and what
 * makes them look again (code mapped, a lost record). Needs perf events system-wide (root).
 */
#include "test_util.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "record/mapwatch.h"

static struct mapwatch *open_or_skip(unsigned pages)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);
	struct mapwatch *mw = mapwatch_open((int)n, pages);

	if (!mw && (errno == EACCES || errno == EPERM || errno == ENOENT || errno == ENOSYS)) {
		print_message("no system-wide perf events here (%s): skipped\n", strerror(errno));
		skip();
	}
	assert_non_null(mw);
	return mw;
}

static void test_no_watch_means_always_changed(void **state)
{
	(void)state;
	assert_true(mapwatch_changed(NULL, MAPWATCH_REGION, 1));
	assert_true(mapwatch_changed(NULL, MAPWATCH_REGION, 1));
	assert_null(mapwatch_open(1, 3)); /* not a power of two */
	assert_int_equal(errno, EINVAL);
}

static void test_code_mapped_is_seen(void **state)
{
	struct mapwatch *mw = open_or_skip(8);
	uint32_t me = (uint32_t)getpid();
	long page = sysconf(_SC_PAGESIZE);
	void *code, *data;

	(void)state;
	mapwatch_poll(mw);
	assert_true(mapwatch_changed(mw, MAPWATCH_REGION, me)); /* the first look */
	assert_false(mapwatch_changed(mw, MAPWATCH_REGION, me));
	assert_true(mapwatch_changed(mw, MAPWATCH_PYTHON, me)); /* each user has its own */

	/* Data mappings are not code: nothing to look at again. */
	data = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(data != MAP_FAILED);
	mapwatch_poll(mw);
	assert_false(mapwatch_changed(mw, MAPWATCH_REGION, me));

	/* mprotect making it executable is a new code mapping (a JIT's way). */
	assert_int_equal(mprotect(data, (size_t)page, PROT_READ | PROT_EXEC), 0);
	mapwatch_poll(mw);
	assert_true(mapwatch_changed(mw, MAPWATCH_REGION, me));
	assert_false(mapwatch_changed(mw, MAPWATCH_REGION, me));

	/* So is an executable mmap; and the other user, not asked since, sees it once too. */
	code = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(code != MAP_FAILED);
	mapwatch_poll(mw);
	assert_true(mapwatch_changed(mw, MAPWATCH_REGION, me));
	assert_true(mapwatch_changed(mw, MAPWATCH_PYTHON, me));
	assert_false(mapwatch_changed(mw, MAPWATCH_PYTHON, me));

	/* Not read yet means not seen yet: the answer moves only on mapwatch_poll. */
	munmap(code, (size_t)page);
	code = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_false(mapwatch_changed(mw, MAPWATCH_REGION, me));
	mapwatch_poll(mw);
	assert_true(mapwatch_changed(mw, MAPWATCH_REGION, me));
	munmap(code, (size_t)page);
	munmap(data, (size_t)page);
	mapwatch_close(mw);
}

static void test_new_process_is_seen(void **state)
{
	struct mapwatch *mw = open_or_skip(8);
	int status;
	pid_t child;

	(void)state;
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		pause();
		_exit(0);
	}
	mapwatch_poll(mw);
	assert_true(mapwatch_changed(mw, MAPWATCH_CUDA, (uint32_t)child));
	assert_false(mapwatch_changed(mw, MAPWATCH_CUDA, (uint32_t)child));
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	mapwatch_close(mw);
}

/* A ring too small for what comes: the lost records make every process "changed". */
static void test_lost_records_reset_everyone(void **state)
{
	struct mapwatch *mw = open_or_skip(1);
	long page = sysconf(_SC_PAGESIZE);
	struct mapwatch_stats st;
	uint32_t me = (uint32_t)getpid();

	cpu_set_t one, was;

	(void)state;
	/* on one CPU: all the records go to one ring */
	assert_int_equal(sched_getaffinity(0, sizeof(was), &was), 0);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &was)) {
			CPU_SET(c, &one);
			break;
		}
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	mapwatch_poll(mw);
	assert_true(mapwatch_changed(mw, MAPWATCH_REGION, 1)); /* a process that maps nothing */
	assert_false(mapwatch_changed(mw, MAPWATCH_REGION, 1));
	assert_true(mapwatch_changed(mw, MAPWATCH_REGION, me));
	for (int i = 0; i < 400; i++) {
		/* alternating protections keep the kernel from merging them into one mapping */
		void *m = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		assert_true(m != MAP_FAILED);
		munmap(m, (size_t)page);
	}
	/* a full ring is taken for a loss: the kernel says so only with the next record */
	mapwatch_poll(mw);
	mapwatch_stats(mw, &st);
	assert_true(st.records > 0);
	assert_true(st.resets >= 1);
	assert_true(mapwatch_changed(mw, MAPWATCH_REGION, 1));
	assert_true(mapwatch_changed(mw, MAPWATCH_REGION, me));
	assert_false(mapwatch_changed(mw, MAPWATCH_REGION, 1));
	sched_setaffinity(0, sizeof(was), &was);
	mapwatch_close(mw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_watch_means_always_changed),
	    cmocka_unit_test(test_code_mapped_is_seen),
	    cmocka_unit_test(test_new_process_is_seen),
	    cmocka_unit_test(test_lost_records_reset_everyone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
