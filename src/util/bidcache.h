/* SPDX-License-Identifier: MIT */
/*
 * The build-id cache (docs/cache.md): what the recorder derives from an ELF object, kept on
 * disk between runs, keyed by the object's GNU build-id. One file per (kind, build-id) under
 * $XDG_CACHE_HOME/eprof (default ~/.cache/eprof): a header (magic, format version, the
 * kind's own version, kind, build-id, payload length, a 256-bit checksum of header and payload) and
 * the payload. Entries are written to a temporary name and renamed (concurrent recorders),
 * read only when they are regular files of our own uid, 0600, reached without following a
 * link, and whole and matching their checksum; anything else is removed and rebuilt. The
 * directory is bounded (default 1 GiB): the least recently used entries go first (a hit
 * touches its entry's mtime).
 *
 * One cache per process, set up once (bidcache_setup); off until then, and off with
 * EPROF_CACHE=0. Safe to call from several threads.
 */
#ifndef EPROF_BIDCACHE_H
#define EPROF_BIDCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BIDCACHE_DEFAULT_MAX (1ULL << 30)
#define BIDCACHE_MAX_ENTRY (512ULL << 20) /* a bigger payload is not stored */
#define BIDCACHE_MAX_BID 128		  /* hex characters of a build-id */

/*
 * Turns the process's cache on (enabled, and EPROF_CACHE is not "0") in dir, or the default
 * when dir is NULL ($XDG_CACHE_HOME/eprof, else $HOME/.cache/eprof), at most max_bytes
 * (0: EPROF_CACHE_MAX bytes when set, else BIDCACHE_DEFAULT_MAX). The directory is made on
 * first use. Resets the counters.
 */
void bidcache_setup(bool enabled, const char *dir, uint64_t max_bytes);
bool bidcache_enabled(void);
/* The directory the cache uses (set up or default), or NULL when none can be named. */
const char *bidcache_path(void);

/*
 * The payload of (kind, build_id) written with version kind_version: 0 and *data (malloc'd,
 * *len bytes), or -ENOENT (none, off, or an entry refused and removed), -ENOMEM.
 * kind: [a-z0-9]{1,15}; build_id: lower-case hex.
 */
int bidcache_get(const char *kind, uint32_t kind_version, const char *build_id, void **data,
		 size_t *len);
/* Stores a payload (replacing any entry), then evicts down to the bound. 0 or -errno. */
int bidcache_put(const char *kind, uint32_t kind_version, const char *build_id, const void *data,
		 size_t len);

struct bidcache_counters {
	uint64_t hits;	  /* entries read and trusted */
	uint64_t misses;  /* no entry */
	uint64_t refused; /* an entry there but not trusted (bad checksum, truncated, old
			     version, not ours, a link...): removed, rebuilt */
	uint64_t stored;
	uint64_t store_failed;
	uint64_t evicted;
};
void bidcache_counters(struct bidcache_counters *out);

/* What the directory holds now. */
struct bidcache_usage {
	uint64_t entries, bytes; /* entries of ours */
	uint64_t foreign;	 /* files we would not trust (other owner, links, not regular) */
	uint64_t tmp;		 /* temporary files of writers (or of writers that died) */
	uint64_t max_bytes;
};
/* 0, -ENOENT (no directory yet) or -errno (the directory is not ours...). */
int bidcache_usage(struct bidcache_usage *u);
/* Removes every entry and temporary file (and any foreign file); *removed gets the count. */
int bidcache_clear(uint64_t *removed);
/* Removes least recently used entries until the entries take at most max_bytes. */
int bidcache_evict(uint64_t max_bytes);

#endif
