// SPDX-License-Identifier: MIT
#include "record/mapwatch.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include "util/hmap.h"

/*
 * Pids the table holds before it starts over: each process that forks or maps code while the
 * record runs takes one entry, and each feature's last look one more.
 */
#define MAPWATCH_MAX_ENTRIES 65536
/* An MMAP record: header, pid, tid, addr, len, pgoff and a path of up to PATH_MAX. */
#define MAPWATCH_MAX_RECORD (48 + PATH_MAX)

struct mw_ring {
	int fd;
	void *base;			/* the control page, then the data pages */
	size_t data_size;		/* a power of two */
};

struct mapwatch {
	struct mw_ring *rings;
	int nrings;
	/*
	 * (pid, 0): records seen for the process; (pid, who): the generation who last got
	 * true with. A generation is epoch << 32 | count: a reset moves every one of them.
	 */
	struct hmap *gen;
	uint64_t epoch;
	struct mapwatch_stats st;
};

static int open_dummy(int cpu)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_DUMMY,
		.mmap = 1,   /* executable mappings only (no mmap_data) */
		.task = 1,   /* fork: a new process may take a pid seen before */
		.watermark = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};

	/* Read on the session's timer, never woken: a wakeup only when the ring is full. */
	attr.wakeup_watermark = 1u << 30;
	return (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

struct mapwatch *mapwatch_open(int ncpus, unsigned ring_pages)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct mapwatch *mw;
	int err = 0, opened = 0;

	if (ncpus <= 0 || !ring_pages || (ring_pages & (ring_pages - 1))) {
		errno = EINVAL;
		return NULL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	mw->rings = calloc((size_t)ncpus, sizeof(*mw->rings));
	mw->gen = hmap__new(1024);
	if (!mw->rings || !mw->gen) {
		mapwatch_close(mw);
		errno = ENOMEM;
		return NULL;
	}
	mw->nrings = ncpus;
	for (int cpu = 0; cpu < ncpus; cpu++) {
		mw->rings[cpu].fd = -1;
		mw->rings[cpu].base = MAP_FAILED;
	}
	for (int cpu = 0; cpu < ncpus; cpu++) {
		struct mw_ring *r = &mw->rings[cpu];

		r->fd = open_dummy(cpu);
		if (r->fd < 0) {
			if (errno == ENODEV || errno == ENOENT)
				continue; /* offline CPU */
			err = errno;
			break;
		}
		r->data_size = ring_pages * page;
		r->base = mmap(NULL, page + r->data_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			       r->fd, 0);
		if (r->base == MAP_FAILED) {
			err = errno;
			break;
		}
		opened++;
	}
	if (!err && !opened)
		err = ENODEV;
	if (err) {
		mapwatch_close(mw);
		errno = err;
		return NULL;
	}
	return mw;
}

void mapwatch_close(struct mapwatch *mw)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (!mw)
		return;
	for (int i = 0; mw->rings && i < mw->nrings; i++) {
		struct mw_ring *r = &mw->rings[i];

		if (r->base != MAP_FAILED)
			munmap(r->base, page + r->data_size);
		if (r->fd >= 0)
			close(r->fd);
	}
	free(mw->rings);
	hmap__free(mw->gen);
	free(mw);
}

/* Every generation moves: a record was lost, or the table is full. */
static void reset(struct mapwatch *mw)
{
	struct hmap *fresh = hmap__new(1024);

	mw->epoch++;
	mw->st.resets++;
	if (fresh) {
		hmap__free(mw->gen);
		mw->gen = fresh;
	}
}

static void bump(struct mapwatch *mw, uint32_t pid)
{
	uint64_t n = 0;

	if (hmap__count(mw->gen) >= MAPWATCH_MAX_ENTRIES)
		reset(mw);
	hmap__get(mw->gen, pid, 0, &n);
	if (hmap__put(mw->gen, pid, 0, n + 1))
		reset(mw); /* out of memory: the count is unknown */
}

/* The 8 bytes after a record's header: pid and tid in MMAP, FORK (pid, ppid) and COMM. */
static void read_ring(struct mapwatch *mw, struct mw_ring *r)
{
	struct perf_event_mmap_page *mp = r->base;
	const unsigned char *data = (const unsigned char *)r->base + mp->data_offset;
	uint64_t mask = r->data_size - 1;
	uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = mp->data_tail;

	/*
	 * The kernel writes its LOST record only when the next record comes: a ring with less
	 * room left than the largest record may have dropped one already.
	 */
	if (head - tail + MAPWATCH_MAX_RECORD > r->data_size)
		reset(mw);
	while (tail < head) {
		struct perf_event_header h;
		uint32_t ids[4];

		/* Records are 8-byte aligned and sized: neither 8-byte piece wraps. */
		memcpy(&h, data + (tail & mask), sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail) {
			reset(mw); /* cannot happen: start over rather than misread */
			tail = head;
			break;
		}
		if (h.size >= sizeof(h) + 16) {
			memcpy(&ids[0], data + ((tail + 8) & mask), 8);
			memcpy(&ids[2], data + ((tail + 16) & mask), 8);
		} else {
			memset(ids, 0, sizeof(ids));
		}
		mw->st.records++;
		switch (h.type) {
		case PERF_RECORD_MMAP:
			bump(mw, ids[0]);
			break;
		case PERF_RECORD_FORK:
			/* pid, ppid, tid, ptid: a thread keeps its process's pid and maps. */
			if (ids[0] == ids[2])
				bump(mw, ids[0]);
			break;
		case PERF_RECORD_LOST:
			reset(mw);
			break;
		default:
			break;
		}
		tail += h.size;
	}
	__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
}

void mapwatch_poll(struct mapwatch *mw)
{
	if (!mw)
		return;
	for (int i = 0; i < mw->nrings; i++)
		if (mw->rings[i].fd >= 0 && mw->rings[i].base != MAP_FAILED)
			read_ring(mw, &mw->rings[i]);
}

bool mapwatch_changed(struct mapwatch *mw, enum mapwatch_user who, uint32_t pid)
{
	uint64_t n = 0, seen, gen;

	if (!mw)
		return true;
	hmap__get(mw->gen, pid, 0, &n);
	gen = mw->epoch << 32 | (n & 0xffffffffu);
	if (hmap__get(mw->gen, pid, who, &seen) && seen == gen)
		return false;
	if (hmap__count(mw->gen) >= MAPWATCH_MAX_ENTRIES) {
		reset(mw);
		gen = mw->epoch << 32;
	}
	hmap__put(mw->gen, pid, who, gen); /* out of memory: asked again, true again */
	return true;
}

void mapwatch_stats(const struct mapwatch *mw, struct mapwatch_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (mw)
		*out = mw->st;
}
