/* SPDX-License-Identifier: MIT */
/*
 * pprof's profile.proto, gzip-compressed, written by hand (no libprotobuf):
 * what `go tool pprof`, pprof's web UI and speedscope read.
 *
 *  sample types  samples/count and cpu/nanoseconds (period cpu/nanoseconds)
 *  samples       one per (stack, pid, tid), labels pid, tid (numbers) and thread
 *  locations     one per eprof location; its lines are the symbolic frames,
 *                innermost inlined function first (as profile.proto orders them)
 *  functions     one per (name, source file)
 *  mappings      one per binary, with path and build-id
 *  comments      the record's metadata (command, host, kernel, lost samples...)
 */
#ifndef EPROF_PPROF_H
#define EPROF_PPROF_H

#include "analysis/hot.h"

struct sink;

struct pprof_opts {
	struct sample_filter filter;
	int level; /* zlib level, 0 = default (6) */
};

int pprof_write(struct sink *out, const struct profile *p, const struct pprof_opts *o);

/* The encoder's building blocks, for tests: protobuf wire format into a struct buf. */
struct buf;
void pb_varint_field(struct buf *b, unsigned field, uint64_t v);
void pb_bytes_field(struct buf *b, unsigned field, const void *data, size_t len);

#endif
