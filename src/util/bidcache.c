// SPDX-License-Identifier: MIT
/* The build-id cache (bidcache.h, docs/cache.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/bidcache.h"
#include "util/fdio.h"
#include "util/log.h"
#include "util/hmap.h"

#define BC_MAGIC "EPROFBC\n"
#define BC_FORMAT 1 /* of the header and the file; a change here invalidates every entry */
#define BC_TMP ".tmp-"
#define BC_TMP_STALE_S 3600 /* a temporary file this old belongs to a writer that died */

struct bc_hdr {
	char magic[8];
	uint32_t format;
	uint32_t kind_version;
	char kind[16];
	char build_id[BIDCACHE_MAX_BID + 8];
	uint64_t len;
	uint8_t sum[32]; /* checksum of the header (this field zero) and the payload */
};

static struct {
	pthread_mutex_t mu;
	bool on;
	bool dir_refused; /* said once: the directory is not ours */
	char dir[PATH_MAX];
	uint64_t max;
	int dirfd;
	struct bidcache_counters c;
} bc = {.mu = PTHREAD_MUTEX_INITIALIZER, .dirfd = -1};

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	return *end ? 0 : v;
}

static bool default_dir(char *out, size_t len)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	struct passwd *pw;

	/* XDG: a relative value is invalid and ignored */
	if (xdg && xdg[0] == '/')
		return snprintf(out, len, "%s/eprof", xdg) < (int)len;
	if (!home || home[0] != '/') {
		pw = getpwuid(geteuid());
		home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
	}
	return home && snprintf(out, len, "%s/.cache/eprof", home) < (int)len;
}

void bidcache_setup(bool enabled, const char *dir, uint64_t max_bytes)
{
	const char *env = getenv("EPROF_CACHE");

	pthread_mutex_lock(&bc.mu);
	if (bc.dirfd >= 0)
		close(bc.dirfd);
	bc.dirfd = -1;
	bc.dir_refused = false;
	memset(&bc.c, 0, sizeof(bc.c));
	bc.on = enabled && !(env && !strcmp(env, "0"));
	if (dir)
		bc.on = bc.on && snprintf(bc.dir, sizeof(bc.dir), "%s", dir) < (int)sizeof(bc.dir);
	else
		bc.on = default_dir(bc.dir, sizeof(bc.dir)) && bc.on;
	bc.max = max_bytes ? max_bytes : parse_size(getenv("EPROF_CACHE_MAX"));
	if (!bc.max)
		bc.max = BIDCACHE_DEFAULT_MAX;
	pthread_mutex_unlock(&bc.mu);
}

bool bidcache_enabled(void)
{
	bool on;

	pthread_mutex_lock(&bc.mu);
	on = bc.on;
	pthread_mutex_unlock(&bc.mu);
	return on;
}

const char *bidcache_path(void)
{
	if (!bc.dir[0] && !default_dir(bc.dir, sizeof(bc.dir)))
		return NULL;
	return bc.dir;
}

static void count(uint64_t *what)
{
	pthread_mutex_lock(&bc.mu);
	(*what)++;
	pthread_mutex_unlock(&bc.mu);
}

void bidcache_counters(struct bidcache_counters *out)
{
	pthread_mutex_lock(&bc.mu);
	*out = bc.c;
	pthread_mutex_unlock(&bc.mu);
}

/* mkdir -p, each new component 0700. */
static void make_parents(const char *dir)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(p, 0700);
		*s = '/';
	}
	mkdir(p, 0700);
}

/*
 * The directory, opened once (made when create): ours, not a link, 0700. Another user's
 * directory is refused (the cache is then off for this process). Called with bc.mu held.
 */
static int dir_fd_locked(bool create)
{
	struct stat st;
	int fd;

	if (bc.dirfd >= 0)
		return bc.dirfd;
	if (!bc.dir[0] && !default_dir(bc.dir, sizeof(bc.dir)))
		return -ENOENT;
	if (create)
		make_parents(bc.dir);
	fd = open(bc.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_uid != geteuid()) {
		if (!bc.dir_refused)
			log_warn("cache: '%s' is not a directory of uid %u: not used", bc.dir,
				 (unsigned)geteuid());
		bc.dir_refused = true;
		close(fd);
		return -EPERM;
	}
	/* Ours: only we can have widened it; narrow it again. Entries are checked one by one. */
	if ((st.st_mode & 077) && fchmod(fd, 0700)) {
		close(fd);
		return -errno;
	}
	bc.dirfd = fd;
	return fd;
}

static int dir_fd(bool create)
{
	int fd;

	pthread_mutex_lock(&bc.mu);
	fd = dir_fd_locked(create);
	pthread_mutex_unlock(&bc.mu);
	return fd;
}

static bool valid_kind(const char *k)
{
	size_t n = strlen(k);

	if (!n || n > 15)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9')))
			return false;
	return true;
}

static bool valid_bid(const char *b)
{
	size_t n = b ? strlen(b) : 0;

	if (n < 2 || n > BIDCACHE_MAX_BID)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'f') || (b[i] >= '0' && b[i] <= '9')))
			return false;
	return true;
}

/* The entry's file name: "KIND-BUILDID". */
static bool entry_name(const char *kind, const char *bid, char *out, size_t len)
{
	return valid_kind(kind) && valid_bid(bid) &&
	       snprintf(out, len, "%s-%s", kind, bid) < (int)len;
}

/* An entry's name as bidcache_usage counts it: KIND-HEX. */
static bool is_entry_name(const char *name)
{
	const char *dash = strchr(name, '-');
	char kind[16];

	if (!dash || dash == name || dash - name > 15)
		return false;
	memcpy(kind, name, (size_t)(dash - name));
	kind[dash - name] = '\0';
	return valid_kind(kind) && valid_bid(dash + 1);
}

/*
 * The checksum: four 64-bit lanes, each word xor-ed in, multiplied by an odd constant and
 * folded (both bijections, so any change of one word changes its lane), 32 bytes a round;
 * the header's lanes seed the payload's. Not cryptographic, and need not be: it catches
 * truncation, bit rot and torn writes; who may write an entry is settled by the checks of
 * owner, mode and links. SHA-256 cost 10% of a warm record's CPU on 7 MB of entries.
 */
#define BC_P 0x9fb21c651e98df25ULL

static uint64_t load64(const unsigned char *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
	return w;
}

static void lanes_hash(const void *data, size_t len, const uint64_t seed[4], uint64_t out[4])
{
	const unsigned char *p = data;
	unsigned char tail[32];
	uint64_t l[4] = {seed[0], seed[1], seed[2], seed[3]};
	size_t i = 0;

	for (; i + 32 <= len; i += 32)
		for (int j = 0; j < 4; j++) {
			l[j] = (l[j] ^ load64(p + i + 8 * j)) * BC_P;
			l[j] ^= l[j] >> 31;
		}
	if (i < len) {
		memset(tail, 0, sizeof(tail));
		memcpy(tail, p + i, len - i);
		for (int j = 0; j < 4; j++) {
			l[j] = (l[j] ^ load64(tail + 8 * j)) * BC_P;
			l[j] ^= l[j] >> 31;
		}
	}
	for (int j = 0; j < 4; j++)
		out[j] = hash_mix64(l[j] ^ (uint64_t)len ^ ((uint64_t)(j + 1) << 56));
}

static void hdr_sum(const struct bc_hdr *h, const void *payload, size_t len, uint8_t out[32])
{
	static const uint64_t seed[4] = {0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL,
					 0xa4093822299f31d0ULL, 0x082efa98ec4e6c89ULL};
	struct bc_hdr z = *h;
	uint64_t hs[4], sum[4];

	memset(z.sum, 0, sizeof(z.sum));
	lanes_hash(&z, sizeof(z), seed, hs);
	lanes_hash(payload, len, hs, sum);
	memcpy(out, sum, sizeof(sum));
}

/* Removes name only while it is still the file we looked at (a writer may have replaced it). */
static void remove_if_same(int dfd, const char *name, const struct stat *seen)
{
	struct stat now;

	if (!fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) && now.st_dev == seen->st_dev &&
	    now.st_ino == seen->st_ino)
		unlinkat(dfd, name, 0);
}

static int refuse(int dfd, const char *name, const struct stat *st, const char *why)
{
	log_debug("cache: entry %s not trusted (%s): rebuilt", name, why);
	count(&bc.c.refused);
	if (st)
		remove_if_same(dfd, name, st);
	return -ENOENT;
}

int bidcache_get(const char *kind, uint32_t kind_version, const char *build_id, void **data,
		 size_t *len)
{
	char name[BIDCACHE_MAX_BID + 32];
	struct bc_hdr h;
	uint8_t sum[32];
	struct stat st;
	char *buf = NULL;
	size_t plen;
	int dfd, fd, ret = -ENOENT;
	const char *why = NULL;

	*data = NULL;
	*len = 0;
	if (!bidcache_enabled() || !entry_name(kind, build_id, name, sizeof(name)))
		return -ENOENT;
	dfd = dir_fd(false);
	if (dfd < 0) {
		count(&bc.c.misses);
		return -ENOENT;
	}
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) {
			count(&bc.c.misses);
			return -ENOENT;
		}
		/* ELOOP: a link; anything else we cannot open is not ours either */
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
			return refuse(dfd, name, NULL, strerror(errno));
		return refuse(dfd, name, &st, errno == ELOOP ? "a symbolic link" : strerror(errno));
	}
	if (fstat(fd, &st)) {
		why = "fstat failed";
		goto bad_nostat;
	}
	if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_uid != geteuid())
		why = "another user's file";
	else if (st.st_mode & 077)
		why = "readable or writable by others";
	else if (st.st_nlink != 1)
		why = "a hard link";
	else if ((uint64_t)st.st_size < sizeof(h))
		why = "truncated header";
	else if ((uint64_t)st.st_size > sizeof(h) + BIDCACHE_MAX_ENTRY)
		why = "too big";
	if (why)
		goto bad;
	plen = (size_t)st.st_size - sizeof(h);
	buf = malloc(plen ? plen : 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	if (fd_pread_full(fd, &h, sizeof(h), 0) || fd_pread_full(fd, buf, plen, sizeof(h)))
		why = "short read";
	else if (memcmp(h.magic, BC_MAGIC, sizeof(h.magic)))
		why = "not an entry";
	else if (h.format != BC_FORMAT || h.kind_version != kind_version)
		why = "another version";
	else if (strncmp(h.kind, kind, sizeof(h.kind)) ||
		 strncmp(h.build_id, build_id, sizeof(h.build_id)))
		why = "another key";
	else if (h.len != plen)
		why = "truncated";
	if (!why) {
		hdr_sum(&h, buf, plen, sum);
		if (memcmp(sum, h.sum, sizeof(sum)))
			why = "checksum mismatch";
	}
	if (why)
		goto bad;
	futimens(fd, NULL); /* most recently used */
	close(fd);
	count(&bc.c.hits);
	*data = buf;
	*len = plen;
	return 0;
bad:
	ret = refuse(dfd, name, &st, why);
	free(buf);
	close(fd);
	return ret;
bad_nostat:
	close(fd);
	return refuse(dfd, name, NULL, why);
}

int bidcache_put(const char *kind, uint32_t kind_version, const char *build_id, const void *data,
		 size_t len)
{
	char name[BIDCACHE_MAX_BID + 32], tmp[BIDCACHE_MAX_BID + 96];
	struct timespec ts;
	struct bc_hdr h;
	uint64_t max;
	int dfd, fd, err = 0;

	if (!bidcache_enabled())
		return -ENOENT;
	if (!entry_name(kind, build_id, name, sizeof(name)))
		return -EINVAL;
	if (len > BIDCACHE_MAX_ENTRY)
		return -EFBIG;
	dfd = dir_fd(true);
	if (dfd < 0) {
		count(&bc.c.store_failed);
		return dfd;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, BC_MAGIC, sizeof(h.magic));
	h.format = BC_FORMAT;
	h.kind_version = kind_version;
	snprintf(h.kind, sizeof(h.kind), "%s", kind);
	snprintf(h.build_id, sizeof(h.build_id), "%s", build_id);
	h.len = len;
	hdr_sum(&h, data, len, h.sum);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(tmp, sizeof(tmp), BC_TMP "%s.%d.%lx", name, (int)getpid(),
		 (unsigned long)ts.tv_nsec ^ (unsigned long)ts.tv_sec << 20);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	err = fd_write_full(fd, &h, sizeof(h));
	if (!err)
		err = fd_write_full(fd, data, len);
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(dfd, tmp, dfd, name))
		err = -errno;
	if (err)
		unlinkat(dfd, tmp, 0);
out:
	if (err) {
		log_debug("cache: cannot store %s: %s", name, strerror(-err));
		count(&bc.c.store_failed);
		return err;
	}
	count(&bc.c.stored);
	pthread_mutex_lock(&bc.mu);
	max = bc.max;
	pthread_mutex_unlock(&bc.mu);
	bidcache_evict(max);
	return 0;
}

/* --- the directory as a whole ------------------------------------------------------------ */

struct bc_ent {
	char *name;
	uint64_t bytes;
	struct timespec used;
};

enum bc_class { BC_ENTRY, BC_TMPFILE, BC_FOREIGN, BC_SKIP };

static enum bc_class classify(const char *name, const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return BC_SKIP;
	if (!S_ISREG(st->st_mode) || st->st_uid != geteuid())
		return BC_FOREIGN;
	if (!strncmp(name, BC_TMP, strlen(BC_TMP)))
		return BC_TMPFILE;
	return is_entry_name(name) ? BC_ENTRY : BC_FOREIGN;
}

/* Calls fn for every file of the directory (not . and ..); stops at fn's non-zero. */
static int each_file(int dfd,
		     int (*fn)(int dfd, const char *name, const struct stat *st, void *arg),
		     void *arg)
{
	int fd = dup(dfd), err = 0;
	struct dirent *d;
	DIR *dir;

	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return -errno;
	}
	rewinddir(dir);
	while (!err && (d = readdir(dir))) {
		struct stat st;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* gone meanwhile */
		err = fn(dfd, d->d_name, &st, arg);
	}
	closedir(dir);
	return err;
}

static int usage_one(int dfd, const char *name, const struct stat *st, void *arg)
{
	struct bidcache_usage *u = arg;

	switch (classify(name, st)) {
	case BC_ENTRY:
		u->entries++;
		u->bytes += (uint64_t)st->st_size;
		break;
	case BC_TMPFILE:
		u->tmp++;
		break;
	case BC_FOREIGN:
		u->foreign++;
		break;
	case BC_SKIP:
		break;
	}
	return 0;
}

int bidcache_usage(struct bidcache_usage *u)
{
	int dfd;

	memset(u, 0, sizeof(*u));
	pthread_mutex_lock(&bc.mu);
	u->max_bytes = bc.max ? bc.max : BIDCACHE_DEFAULT_MAX;
	pthread_mutex_unlock(&bc.mu);
	dfd = dir_fd(false);
	if (dfd < 0)
		return dfd;
	return each_file(dfd, usage_one, u);
}

static int clear_one(int dfd, const char *name, const struct stat *st, void *arg)
{
	if (classify(name, st) != BC_SKIP && !unlinkat(dfd, name, 0))
		(*(uint64_t *)arg)++;
	return 0;
}

int bidcache_clear(uint64_t *removed)
{
	int dfd = dir_fd(false);

	*removed = 0;
	if (dfd < 0)
		return dfd == -ENOENT ? 0 : dfd;
	return each_file(dfd, clear_one, removed);
}

struct evict_ctx {
	struct bc_ent *v;
	size_t n, cap;
	uint64_t total;
	time_t now;
};

static int evict_collect(int dfd, const char *name, const struct stat *st, void *arg)
{
	struct evict_ctx *c = arg;
	enum bc_class k = classify(name, st);

	if (k == BC_TMPFILE && c->now - st->st_mtime > BC_TMP_STALE_S) {
		unlinkat(dfd, name, 0);
		return 0;
	}
	if (k != BC_ENTRY)
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		struct bc_ent *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n].name = strdup(name);
	if (!c->v[c->n].name)
		return -ENOMEM;
	c->v[c->n].bytes = (uint64_t)st->st_size;
	c->v[c->n].used = st->st_mtim;
	c->total += (uint64_t)st->st_size;
	c->n++;
	return 0;
}

static int by_use(const void *a, const void *b)
{
	const struct bc_ent *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	if (x->used.tv_nsec != y->used.tv_nsec)
		return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

int bidcache_evict(uint64_t max_bytes)
{
	struct evict_ctx c = {.now = time(NULL)};
	int dfd = dir_fd(false), err;

	if (dfd < 0)
		return dfd;
	err = each_file(dfd, evict_collect, &c);
	if (!err && c.total > max_bytes) {
		qsort(c.v, c.n, sizeof(*c.v), by_use);
		for (size_t i = 0; i < c.n && c.total > max_bytes; i++) {
			if (unlinkat(dfd, c.v[i].name, 0))
				continue;
			c.total -= c.v[i].bytes;
			count(&bc.c.evicted);
		}
	}
	for (size_t i = 0; i < c.n; i++)
		free(c.v[i].name);
	free(c.v);
	return err;
}
