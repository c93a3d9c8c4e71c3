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

/*
 * Records a profile holds (samples, events, stack nodes, locations, and the stack nodes its
 * samples walk to the root, by sixteen): what the analyses' cost grows with. A compressed
 * chunk of 64 KB unpacks to 100,000 region events (one `eprof report` of the release build:
 * 0.15 s), and 1,000 samples on a chain of frameless nodes cost 10 million steps; the report
 * harness analyses each input several times under ASan and coverage, 10-25 s an input. The
 * report and trace harnesses skip a profile above FUZZ_MAX_RECORDS (the reader's own
 * harness has no cap): every branch of the analyses is reached with fewer records.
 */
size_t fuzz_profile_records(const struct profile *p);
#define FUZZ_MAX_RECORDS 4096
/*
 * What an eprof.data image's chunks unpack to, from their headers alone: the report and trace
 * harnesses skip an image above FUZZ_MAX_UNPACKED before reading it, since reading 100,000
 * records under ASan and coverage costs more than analysing 4,096.
 */
uint64_t fuzz_unpacked_bytes(const uint8_t *data, size_t size);
#define FUZZ_MAX_UNPACKED (256u << 10)

#endif
