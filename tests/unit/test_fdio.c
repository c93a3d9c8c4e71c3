// SPDX-License-Identifier: MIT
/* util/fdio.c: whole reads and writes through short counts, EINTR and the end of a file. */
#include "test_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include "util/fdio.h"

#define BIG (1 << 20) /* 16 pipe buffers: the writer blocks, and is interrupted, many times */

static void on_alarm(int sig)
{
	(void)sig;
}

struct drain {
	int fd;
	size_t got;
	unsigned sum;
};

static void *drain(void *arg)
{
	struct drain *d = arg;
	unsigned char buf[4096];
	ssize_t n;

	while ((n = read(d->fd, buf, sizeof(buf))) != 0) {
		if (n < 0)
			continue; /* EINTR */
		for (ssize_t i = 0; i < n; i++)
			d->sum += buf[i];
		d->got += (size_t)n;
		usleep(50); /* slower than the writer: its pipe stays full */
	}
	return NULL;
}

static void test_write_full_through_signals(void **state)
{
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART: write() fails EINTR */
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	unsigned char *data = malloc(BIG);
	struct drain d = { 0 };
	unsigned sum = 0;
	pthread_t th;
	int p[2];

	(void)state;
	assert_non_null(data);
	for (size_t i = 0; i < BIG; i++)
		sum += data[i] = (unsigned char)(i * 7);
	assert_int_equal(pipe(p), 0);
	d.fd = p[0];
	assert_int_equal(pthread_create(&th, NULL, drain, &d), 0);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	assert_int_equal(fd_write_full(p[1], data, BIG), 0);
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	close(p[1]);
	pthread_join(th, NULL);
	close(p[0]);
	assert_int_equal(d.got, BIG);
	assert_int_equal(d.sum, sum);
	free(data);
}

static void test_reads_and_the_end_of_a_file(void **state)
{
	char path[PATH_MAX + 16], buf[16];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%.*s/fdio-XXXXXX", PATH_MAX - 1, test_tmpdir());
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(fd_write_full(fd, "0123456789", 10), 0);
	assert_int_equal(fd_pread_full(fd, buf, 4, 3), 0);
	assert_memory_equal(buf, "3456", 4);
	assert_int_equal(fd_pread_full(fd, buf, 8, 5), -ENODATA); /* 5 bytes left */
	assert_int_equal(fd_pread_upto(fd, buf, 8, 5), 5);
	assert_memory_equal(buf, "56789", 5);
	assert_int_equal(fd_pread_upto(fd, buf, 8, 10), 0);
	assert_int_equal(fd_pread_full(fd, buf, 0, 10), 0);
	close(fd);
	assert_int_equal(fd_pread_full(fd, buf, 1, 0), -EBADF);
	assert_int_equal(fd_write_full(fd, "x", 1), -EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_write_full_through_signals),
	    cmocka_unit_test(test_reads_and_the_end_of_a_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
