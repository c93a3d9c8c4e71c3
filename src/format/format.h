/* SPDX-License-Identifier: MIT */
/*
 * eprof.data: a versioned header, then chunks (zlib-compressed, CRC32 each).
 * Every chunk holds the table entries added since the previous one, so a
 * file cut off mid-write opens up to its last whole chunk. See
 * docs/file-format.md.
 */
#ifndef EPROF_FORMAT_H
#define EPROF_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/profile.h"

#define EPROF_FILE_MAGIC "EPROFDAT"
/*
 * Version 2: a chunk's sixth header word names its codec (chunk_codec); version 1 files
 * have 0 there (zlib) and are still read.
 */
#define EPROF_FILE_VERSION 2
#define EPROF_FILE_VERSION_MIN 1
#define EPROF_CHUNK_MAGIC 0x4b484345u /* "ECHK" */
#define EPROF_HEADER_SIZE 24
#define EPROF_CHUNK_HDR_SIZE 24
#define EPROF_CHUNK_MAX (512u << 20) /* raw bytes: larger is corruption, not data */

enum chunk_type {
	CHUNK_DATA = 1,	   /* tables: strings .. samples */
	CHUNK_SYMBOLS = 2, /* frames of locations, written at the end of record */
	CHUNK_END = 3,	   /* final metadata and counters: the file is complete */
};

enum chunk_codec {
	CODEC_ZLIB = 0, /* every chunk of version 1 files */
	CODEC_ZSTD = 1, /* what the writer uses since version 2 */
};

enum section_tag {
	SEC_STRINGS = 1,
	SEC_OBJECTS = 2,
	SEC_LOCATIONS = 3,
	SEC_STACKS = 4,
	SEC_PROCS = 5,
	SEC_THREADS = 6,
	SEC_MAPPINGS = 7,
	SEC_SAMPLES = 8,
	SEC_META = 9,
	SEC_STATS = 10,
	SEC_FRAMES = 11,
	SEC_EVENTS = 12, /* struct event, appended like samples */
};

struct eprof_writer;

/*
 * Creates path with mode 0600, never through a symlink, and refuses a
 * regular file owned by another user. Returns NULL with errno set.
 */
/* NULL with errno EBUSY when another writer holds path (each holds it until it closes). */
struct eprof_writer *eprof_writer__open(const char *path);
/* Writes everything added to p since the last flush as one chunk. */
int eprof_writer__flush(struct eprof_writer *w, struct profile *p);
/*
 * After a flush the samples already written can be dropped from memory
 * (record does this to keep its memory flat); the writer keeps its position.
 */
void eprof_writer__forget_samples(struct eprof_writer *w, struct profile *p);
/* The same for p->events and p->mappings (the recorder never reads them back). */
void eprof_writer__forget_events(struct eprof_writer *w, struct profile *p);
void eprof_writer__forget_mappings(struct eprof_writer *w, struct profile *p);
/*
 * After a flush: drops from memory the processes (and their threads) that exited before
 * `before`; they are in the file. Later chunks carry only processes that change, as before.
 */
int eprof_writer__forget_exited(struct eprof_writer *w, struct profile *p, uint64_t before);
/* Flushes, writes the symbols of every location and the END chunk, closes. */
int eprof_writer__finish(struct eprof_writer *w, struct profile *p);
/* Closes without finishing (error paths); the file stays readable up to its last chunk. */
void eprof_writer__abort(struct eprof_writer *w);
uint64_t eprof_writer__bytes(const struct eprof_writer *w);
uint64_t eprof_writer__samples_written(const struct eprof_writer *w);

struct read_info {
	bool complete;	       /* END chunk seen */
	bool has_symbols;      /* SYMBOLS chunk seen */
	uint32_t chunks;       /* whole chunks read */
	uint64_t bytes_lost;   /* bytes after the last whole chunk (a cut-off file) */
	uint32_t owner;	       /* the file's uid */
	bool foreign;	       /* another user's file (not our effective uid's) */
	char error[256];       /* set when the read failed */
};

/* Reads a file (or a memory image). Returns 0, or -errno with info->error set. */
int eprof_read_file(const char *path, struct profile **out, struct read_info *info);
int eprof_read_mem(const void *data, size_t len, struct profile **out, struct read_info *info);

#endif
