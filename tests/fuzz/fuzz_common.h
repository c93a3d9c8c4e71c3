/* SPDX-License-Identifier: MIT */
/* Shared helpers of the libFuzzer targets: scratch files on tmpfs and output oracles. */
#ifndef EPROF_FUZZ_COMMON_H
#define EPROF_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes data to NAME in this process's scratch directory on /dev/shm; returns its path. */
const char *fuzz_file(const char *name, const uint8_t *data, size_t size);
/* The scratch directory itself (created on first use, removed at exit). */
const char *fuzz_dir(void);

/* Quiets eprof's logging (errors about bad input are expected by the thousand). */
void fuzz_quiet(void);

/* Well-formed UTF-8 without surrogates or overlong forms. */
bool fuzz_utf8_valid(const char *s, size_t len);
/* A complete RFC 8259 JSON text (strict: UTF-8, no control characters in strings). */
bool fuzz_json_valid(const char *s, size_t len);

/* Fails the run (libFuzzer saves the input) with a message when an output oracle breaks. */
#define FUZZ_CHECK(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fuzz_fail(__FILE__, __LINE__, __VA_ARGS__);                                \
	} while (0)
void fuzz_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 3, 4)));

/*
 * Addresses worth looking up in a text symbol file: 0, ~0 and the leading hex number of each
 * line, up to max. Returns how many.
 */
size_t fuzz_line_addrs(const uint8_t *d, size_t size, uint64_t *addr, size_t max);

/* Little-endian u64 from up to 8 bytes at p (fewer bytes: zero-extended). */
uint64_t fuzz_u64(const uint8_t *p, size_t avail);

struct profile;
/* The model invariants every writer relies on; fails the run when one is broken. */
void fuzz_check_profile(const struct profile *p);
/* Reads an eprof.data image; NULL when the reader rejects it (then checks the error text). */
struct profile *fuzz_read_profile(const uint8_t *data, size_t size);

/*
 * Frames of the distinct (thread name, stack) pairs that have samples (what folded stacks
 * and flamegraphs write), each counted up to cap frames (where the writer cuts a stack;
 * 0 = no cap).
 */
uint64_t fuzz_stack_frames(const struct profile *p, uint64_t cap);
/*
 * The folded and flamegraph harnesses skip a profile above this: 64 KB can hold 1,000
 * stacks of 4,096 frames, whose 4M-frame output takes 10-20 s under ASan, as long as
 * libFuzzer's timeout, for the size and not for any bug (the CLI writes it in 0.4 s).
 */
#define FUZZ_MAX_OUTPUT_FRAMES 500000

#endif
