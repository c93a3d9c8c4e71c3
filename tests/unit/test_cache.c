// SPDX-License-Identifier: MIT
/*
 * The build-id cache (util/bidcache.c) and the symbolizer's use of it: round trip, entries
 * that must not be trusted (corrupt, truncated, another version, a link, not ours, readable
 * by others), eviction by size, and the same names from a cached symbol table as from the file.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#include "test_util.h"
#include "sym/symbolizer.h"
#include "util/bidcache.h"

#define BID "0123456789abcdef0123456789abcdef01234567"
#define BID2 "fedcba9876543210fedcba9876543210fedcba98"

static char dir[PATH_MAX + 64];

/* A fresh cache directory for each test (its parent made by bidcache_put). */
static int fresh(void **state)
{
	static int n;

	snprintf(dir, sizeof(dir), "%.*s/cache%d/eprof", PATH_MAX - 64, test_tmpdir(), n++);
	unsetenv("EPROF_CACHE");
	bidcache_setup(true, dir, 0);
	return 0;
}

static const char *entry(const char *kind, const char *bid)
{
	static char p[PATH_MAX + 200];

	snprintf(p, sizeof(p), "%s/%s-%s", dir, kind, bid);
	return p;
}

static void put_payload(const char *bid, size_t len, uint32_t version)
{
	char *buf = malloc(len);

	assert_non_null(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(i * 7 + 3);
	assert_int_equal(bidcache_put("sym", version, bid, buf, len), 0);
	free(buf);
}

static bool get_ok(const char *bid, size_t len, uint32_t version)
{
	void *data;
	size_t n;
	bool ok;

	if (bidcache_get("sym", version, bid, &data, &n))
		return false;
	ok = n == len;
	for (size_t i = 0; ok && i < len; i++)
		ok = ((char *)data)[i] == (char)(i * 7 + 3);
	free(data);
	return ok;
}

static void test_round_trip(void **state)
{
	struct bidcache_counters c;
	struct bidcache_usage u;
	struct stat st;
	void *data;
	size_t n;

	assert_int_equal(bidcache_get("sym", 1, BID, &data, &n), -ENOENT); /* no directory */
	put_payload(BID, 10000, 1);
	assert_true(get_ok(BID, 10000, 1));
	assert_true(get_ok(BID, 10000, 1));
	put_payload(BID2, 0, 1); /* an empty payload is an entry too */
	assert_true(get_ok(BID2, 0, 1));
	assert_int_equal(bidcache_get("cfi", 1, BID, &data, &n), -ENOENT); /* another kind */
	bidcache_counters(&c);
	assert_int_equal(c.hits, 3);
	assert_int_equal(c.misses, 2);
	assert_int_equal(c.stored, 2);
	assert_int_equal(c.refused, 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(stat(entry("sym", BID), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(bidcache_usage(&u), 0);
	assert_int_equal(u.entries, 2);
	assert_int_equal(u.tmp, 0);
	/* keys that would name another file are refused */
	assert_int_equal(bidcache_put("sym", 1, "../../etc", "x", 1), -EINVAL);
	assert_int_equal(bidcache_put("Sym/", 1, BID, "x", 1), -EINVAL);
	assert_int_equal(bidcache_put("sym", 1, "ABCDEF", "x", 1), -EINVAL);
	/* clear empties it */
	{
		uint64_t removed;

		assert_int_equal(bidcache_clear(&removed), 0);
		assert_int_equal(removed, 2);
		assert_false(get_ok(BID, 10000, 1));
	}
}

static void refused_and_rebuilt(const char *why)
{
	struct bidcache_counters before, after;

	bidcache_counters(&before);
	assert_false(get_ok(BID, 4096, 1));
	bidcache_counters(&after);
	if (after.refused != before.refused + 1)
		fail_msg("%s: not refused", why);
	/* the bad entry is gone: the next reader misses, a writer rebuilds it */
	assert_int_equal(access(entry("sym", BID), F_OK), -1);
	put_payload(BID, 4096, 1);
	assert_true(get_ok(BID, 4096, 1));
}

static void flip_byte(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	unsigned char b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, off), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

static void test_corrupt_entry(void **state)
{
	struct stat st;

	put_payload(BID, 4096, 1);
	assert_int_equal(stat(entry("sym", BID), &st), 0);
	flip_byte(entry("sym", BID), st.st_size - 100); /* the payload */
	refused_and_rebuilt("payload byte");
	flip_byte(entry("sym", BID), 30); /* the header's kind */
	refused_and_rebuilt("header byte");
	flip_byte(entry("sym", BID), 2); /* the magic */
	refused_and_rebuilt("magic");
}

static void test_truncated_entry(void **state)
{
	struct stat st;

	put_payload(BID, 4096, 1);
	assert_int_equal(stat(entry("sym", BID), &st), 0);
	assert_int_equal(truncate(entry("sym", BID), st.st_size - 1), 0);
	refused_and_rebuilt("one byte short");
	assert_int_equal(truncate(entry("sym", BID), 40), 0);
	refused_and_rebuilt("header cut");
	assert_int_equal(truncate(entry("sym", BID), 0), 0);
	refused_and_rebuilt("empty");
	/* longer than its header says */
	{
		int fd = open(entry("sym", BID), O_WRONLY | O_APPEND);

		assert_true(fd >= 0);
		assert_int_equal(write(fd, "more", 4), 4);
		close(fd);
	}
	refused_and_rebuilt("longer");
}

static void test_wrong_version(void **state)
{
	void *data;
	size_t n;

	/* the kind's own version: a reader of version 2 does not take version 1's entry */
	put_payload(BID, 4096, 1);
	assert_int_equal(bidcache_get("sym", 2, BID, &data, &n), -ENOENT);
	assert_int_equal(access(entry("sym", BID), F_OK), -1);
	/* the file format's version (the header's second field), checksum made to match */
	put_payload(BID, 4096, 1);
	flip_byte(entry("sym", BID), 8);
	refused_and_rebuilt("format version");
}

static void set_used(const char *bid, time_t t)
{
	struct timespec ts[2] = {{t, 0}, {t, 0}};

	assert_int_equal(utimensat(AT_FDCWD, entry("sym", bid), ts, 0), 0);
}

static void test_eviction(void **state)
{
	const char *bids[4] = {"aa01", "aa02", "aa03", "aa04"};
	struct bidcache_counters c;
	struct bidcache_usage u;
	time_t now = time(NULL);
	/* room for three entries of 10,000 bytes and their headers */
	uint64_t max = 3 * (10000 + 512);

	bidcache_setup(true, dir, max);
	for (int i = 0; i < 3; i++) {
		put_payload(bids[i], 10000, 1);
		set_used(bids[i], now - 100 + i);
	}
	/* a hit makes aa01 the most recently used: aa02 is now the least */
	assert_true(get_ok("aa01", 10000, 1));
	put_payload(bids[3], 10000, 1);
	assert_int_equal(access(entry("sym", "aa02"), F_OK), -1);
	assert_true(get_ok("aa01", 10000, 1));
	assert_true(get_ok("aa03", 10000, 1));
	assert_true(get_ok("aa04", 10000, 1));
	bidcache_counters(&c);
	assert_int_equal(c.evicted, 1);
	assert_int_equal(bidcache_usage(&u), 0);
	assert_int_equal(u.entries, 3);
	assert_true(u.bytes <= max);
	/* one entry bigger than the bound does not stay */
	put_payload("bb01", 40000, 1);
	assert_int_equal(bidcache_usage(&u), 0);
	assert_true(u.bytes <= max);
	assert_int_equal(bidcache_evict(0), 0);
	assert_int_equal(bidcache_usage(&u), 0);
	assert_int_equal(u.entries, 0);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ssize_t n;

	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
	assert_int_equal(chmod(to, mode), 0);
}

static void test_untrusted_files(void **state)
{
	char saved[PATH_MAX + 128];
	struct bidcache_usage u;
	struct stat st;

	/* a valid entry kept aside: the content an attacker could copy */
	put_payload(BID, 4096, 1);
	snprintf(saved, sizeof(saved), "%s.saved", dir);
	copy_file(entry("sym", BID), saved, 0600);
	/* a symbolic link to a valid entry is never followed; the target stays */
	assert_int_equal(unlink(entry("sym", BID)), 0);
	assert_int_equal(symlink(saved, entry("sym", BID)), 0);
	refused_and_rebuilt("symlink");
	assert_int_equal(stat(saved, &st), 0);
	/* readable by others */
	assert_int_equal(chmod(entry("sym", BID), 0644), 0);
	refused_and_rebuilt("mode 0644");
	/* a hard link (to a file that might be another's) */
	assert_int_equal(unlink(entry("sym", BID)), 0);
	assert_int_equal(link(saved, entry("sym", BID)), 0);
	refused_and_rebuilt("hard link");
	/* not a regular file */
	assert_int_equal(unlink(entry("sym", BID)), 0);
	assert_int_equal(mkfifo(entry("sym", BID), 0600), 0);
	refused_and_rebuilt("fifo");
	/* another user's file with valid content (root only: chown) */
	if (geteuid() == 0) {
		assert_int_equal(unlink(entry("sym", BID)), 0);
		copy_file(saved, entry("sym", BID), 0600);
		assert_int_equal(chown(entry("sym", BID), 65534, 65534), 0);
		assert_int_equal(bidcache_usage(&u), 0);
		assert_int_equal(u.foreign, 1);
		refused_and_rebuilt("owner 65534");
		/* the directory itself another user's: the cache is not used at all */
		assert_int_equal(chown(dir, 65534, 65534), 0);
		bidcache_setup(true, dir, 0);
		assert_false(get_ok(BID, 4096, 1));
		assert_int_not_equal(bidcache_put("sym", 1, BID, "x", 1), 0);
		assert_int_equal(chown(dir, 0, 0), 0);
	}
	/* a directory that is a symbolic link is not opened */
	{
		char link_dir[PATH_MAX + 128];

		snprintf(link_dir, sizeof(link_dir), "%s.link", dir);
		assert_int_equal(symlink(dir, link_dir), 0);
		bidcache_setup(true, link_dir, 0);
		assert_false(get_ok(BID, 4096, 1));
		assert_int_not_equal(bidcache_put("sym", 1, BID, "x", 1), 0);
	}
}

static void test_disabled(void **state)
{
	void *data;
	size_t n;

	put_payload(BID, 100, 1);
	setenv("EPROF_CACHE", "0", 1);
	bidcache_setup(true, dir, 0);
	assert_false(bidcache_enabled());
	assert_int_equal(bidcache_get("sym", 1, BID, &data, &n), -ENOENT);
	assert_int_not_equal(bidcache_put("sym", 1, BID2, "x", 1), 0);
	unsetenv("EPROF_CACHE");
	bidcache_setup(false, dir, 0);
	assert_false(bidcache_enabled());
	bidcache_setup(true, dir, 0);
	assert_true(get_ok(BID, 100, 1));
	assert_int_equal(access(entry("sym", BID2), F_OK), -1);
}

/* --- the symbolizer through the cache ---------------------------------------------------- */

struct where {
	uintptr_t addr;
	char path[PATH_MAX];
	uint64_t off;
};

static int find_phdr(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct where *w = arg;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || w->addr < start || w->addr >= start + ph->p_filesz)
			continue;
		snprintf(w->path, sizeof(w->path), "%s",
			 info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe");
		w->off = w->addr - start + ph->p_offset;
		return 1;
	}
	return 0;
}

/* The names (and lines) of 64 addresses around fn, through a symbolizer as opts say. */
static void names_of(const void *fn, bool lines, bool use_cache, char out[64][256])
{
	struct symbolizer_opts o = {.want_lines = lines, .use_cache = use_cache};
	struct symbolizer *s = symbolizer__new(&o);
	struct where w = {.addr = (uintptr_t)fn};
	char bid[2 * BIDCACHE_MAX_BID + 1];

	assert_non_null(s);
	assert_int_equal(dl_iterate_phdr(find_phdr, &w), 1);
	assert_int_equal(elf_read_build_id(w.path, bid, sizeof(bid)), 0);
	for (int i = 0; i < 64; i++) {
		struct sym_result r = {0};

		out[i][0] = '\0';
		if (symbolizer__elf(s, w.path, bid, w.off + (uint64_t)i * 4, &r))
			continue;
		for (uint32_t f = 0; f < r.n; f++) {
			size_t len = strlen(out[i]);

			snprintf(out[i] + len, 256 - len, "%s:%s:%u;", r.frames[f].name,
				 r.frames[f].file ? r.frames[f].file : "", r.frames[f].line);
		}
		sym_result__free(&r);
	}
	symbolizer__free(s);
}

static void same_names(const void *fn, bool lines)
{
	static char plain[64][256], cold[64][256], warm[64][256];
	struct bidcache_counters c0, c1, c2;
	uint64_t removed;
	int named = 0;

	assert_int_equal(bidcache_clear(&removed), 0);
	names_of(fn, lines, false, plain);
	bidcache_counters(&c0);
	names_of(fn, lines, true, cold);
	bidcache_counters(&c1);
	names_of(fn, lines, true, warm);
	bidcache_counters(&c2);
	assert_int_equal(c1.stored - c0.stored, 1);
	assert_int_equal(c2.hits - c1.hits, 1);
	for (int i = 0; i < 64; i++) {
		assert_string_equal(plain[i], cold[i]);
		assert_string_equal(plain[i], warm[i]);
		named += plain[i][0] != '\0';
	}
	assert_true(named > 0);
}

static void test_symbolizer_same_names(void **state)
{
	/*
	 * libc (no DWARF unless libc6-dbg is installed: the verdict cached), this test's own
	 * code (DWARF: libdwfl opened lazily for it), and names without lines
	 */
	same_names((const void *)qsort, true);
	same_names((const void *)test_round_trip, true);
	same_names((const void *)getpid, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_round_trip, fresh),
	    cmocka_unit_test_setup(test_corrupt_entry, fresh),
	    cmocka_unit_test_setup(test_truncated_entry, fresh),
	    cmocka_unit_test_setup(test_wrong_version, fresh),
	    cmocka_unit_test_setup(test_eviction, fresh),
	    cmocka_unit_test_setup(test_untrusted_files, fresh),
	    cmocka_unit_test_setup(test_disabled, fresh),
	    cmocka_unit_test_setup(test_symbolizer_same_names, fresh),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
