/* SPDX-License-Identifier: MIT */
/* SHA-256 (FIPS 180-4), for the hashes of the HTML export's scripts in its CSP. */
#ifndef EPROF_SHA256_H
#define EPROF_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes so far */
	uint8_t buf[64];
	size_t nbuf;
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *data, size_t n);
void sha256_final(struct sha256 *c, uint8_t out[32]);
/* The digest in base64 (44 characters and a NUL), as a CSP source 'sha256-...' names it. */
void sha256_base64(const uint8_t d[32], char out[45]);

#endif
