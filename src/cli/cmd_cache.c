// SPDX-License-Identifier: MIT
/* eprof cache: what the build-id cache holds (--stats), and emptying it (--clear). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "cmds.h"
#include "util/bidcache.h"
#include "util/log.h"
#include "util/sink.h"

struct cache_cli {
	bool stats, clear;
};

static const struct opt cache_opts[] = {
    OPT_FLAG("stats", 's', struct cache_cli, stats,
	     "the directory, its entries and bytes, and the bound (the default)"),
    OPT_FLAG("clear", 0, struct cache_cli, clear, "remove every entry"),
    OPT_END,
};

static const struct cache_cli cache_defaults = {0};

static int cache_finish(void *opts, int npos, char **pos)
{
	struct cache_cli *o = opts;

	if (npos) {
		log_err("cache: unexpected argument '%s'", pos[0]);
		return -EINVAL;
	}
	if (!o->clear)
		o->stats = true;
	return 0;
}

static int cache_main(struct cmd_ctx *c)
{
	const struct cache_cli *o = c->opts;
	struct bidcache_usage u;
	struct sink *out;
	const char *dir;
	int err;

	bidcache_setup(true, NULL, 0);
	dir = bidcache_path();
	if (!dir) {
		log_err("cache: no directory (neither XDG_CACHE_HOME nor HOME is set)");
		return 1;
	}
	if (o->clear) {
		uint64_t removed;

		err = bidcache_clear(&removed);
		if (err) {
			log_err("cache: cannot clear '%s': %s", dir, strerror(-err));
			return 1;
		}
		log_info("cache: %" PRIu64 " files removed from %s", removed, dir);
	}
	if (!o->stats)
		return 0;
	c->text_out = true;
	c->out_path = "-";
	out = cmd_output(c);
	if (!out)
		return 1;
	err = bidcache_usage(&u);
	if (err && err != -ENOENT) {
		log_err("cache: cannot read '%s': %s", dir, strerror(-err));
		return 1;
	}
	sink_printf(out, "directory: %s%s\n", dir, err == -ENOENT ? " (not made yet)" : "");
	sink_printf(out, "entries:   %" PRIu64 "\n", u.entries);
	sink_printf(out, "bytes:     %" PRIu64 " (%.1f MiB of at most %.1f MiB)\n", u.bytes,
		    u.bytes / 1048576.0, u.max_bytes / 1048576.0);
	if (u.tmp)
		sink_printf(out,
			    "temporary: %" PRIu64 " (being written, or left by a killed writer)\n",
			    u.tmp);
	if (u.foreign)
		sink_printf(out,
			    "not trusted: %" PRIu64 " (another owner, a link, not a regular "
			    "file: never read)\n",
			    u.foreign);
	if (!bidcache_enabled())
		sink_printf(out, "disabled:  EPROF_CACHE=0\n");
	return 0;
}

const struct command cmd_cache = {
    .name = "cache",
    .summary = "the build-id cache of symbol tables: its size, or empty it",
    .usage = "[--stats | --clear]",
    .about = "The recorder keeps what it derives from each binary (symbol tables, load\n"
	     "segments) in $XDG_CACHE_HOME/eprof (default ~/.cache/eprof), keyed by build-id\n"
	     "(docs/cache.md).\n",
    CMD_OPTIONS(cache_opts, cache_defaults),
    .finish = cache_finish,
    .run = cache_main,
};
