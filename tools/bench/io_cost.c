// SPDX-License-Identifier: MIT
/*
 * The workload of tools/bench/io_cost.py: COUNT system calls of one kind, timed from inside,
 * printing "ns_per_call X".
 *   io_cost pread COUNT    pread of 4 KiB at offset 0 of a cached temporary file
 *   io_cost pread1 COUNT   the same, 1 byte: the call itself is all there is
 *   io_cost write COUNT    write of 4 KiB to /dev/null
 *   io_cost getppid COUNT  a call --io does not trace: what every other call pays
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	static char buf[4096];
	char path[] = "/tmp/io_cost.XXXXXX";
	long count = argc == 3 ? atol(argv[2]) : 0, sink = 0;
	int fd = -1, nul = open("/dev/null", O_WRONLY);
	double t0;

	if (count <= 0 || nul < 0) {
		fprintf(stderr, "usage: io_cost pread|pread1|write|getppid COUNT\n");
		return 2;
	}
	fd = mkstemp(path);
	if (fd < 0 || write(fd, buf, sizeof(buf)) != sizeof(buf))
		return 1;
	unlink(path);
	/* Warm up: the page cache, the fd's description in the recorder. */
	for (int i = 0; i < 1000; i++)
		sink += pread(fd, buf, sizeof(buf), 0) + write(nul, buf, sizeof(buf));
	t0 = now();
	if (!strcmp(argv[1], "pread")) {
		for (long i = 0; i < count; i++)
			sink += pread(fd, buf, sizeof(buf), 0);
	} else if (!strcmp(argv[1], "pread1")) {
		for (long i = 0; i < count; i++)
			sink += pread(fd, buf, 1, 0);
	} else if (!strcmp(argv[1], "write")) {
		for (long i = 0; i < count; i++)
			sink += write(nul, buf, sizeof(buf));
	} else if (!strcmp(argv[1], "getppid")) {
		for (long i = 0; i < count; i++)
			sink += getppid();
	} else {
		return 2;
	}
	printf("ns_per_call %.1f\n", (now() - t0) / count);
	return sink == 0;
}
