// SPDX-License-Identifier: MIT
/*
 * Writes a big synthetic, symbolized eprof.data to time the readers on:
 * by default 1,000,000 samples over 100,000 unique stacks of depth 10-40 drawn
 * from 5,000 function names in 24 modules plus the kernel, 3 processes, 8 threads.
 * Stacks share prefixes the way real ones do (each new one mostly extends a cut
 * of an earlier one), sample counts are skewed (a few hot stacks, a long tail),
 * 1 location in 8 carries an inlined callee, ~3% of leaves stay unsymbolized.
 *
 * Build: cmake --build BUILD --target gen_profile (tools/bench/gen_profile.sh does it)
 * Run:
 *   /tmp/build-bench/gen_profile -o big.eprof [-n SAMPLES] [-s STACKS] [-f FUNCS]
 *                                [-t THREADS] [-S SEED] [-m MAPS]
 * -r RANK -w WORLD -c COLLS makes it rank RANK's file of a WORLD-rank job (8 ranks a host,
 * host h's realtime clock h ms off) with COLLS MPI_Allreduce calls, the last rank arriving
 * 5 ms late at each (tools/bench/dist_merge.sh times the job commands on 64 of them).
 * -m MAPS adds MAPS anonymous mmaps of one page in the first process, each below the
 * last (as the kernel places them), all live until it exits, as a program that maps
 * a lot does (tools/bench/mem_maps.sh times the report's mapping replay on them).
 * tools/bench/big_file.sh does both and times eprof report/flamegraph on the file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/format.h"
#include "model/profile.h"

#define NMODULES 24
#define LOCS_PER_FUNC 4
#define MIN_DEPTH 10
#define MAX_DEPTH 40 /* all frames, kernel ones included */
#define MAX_KDEPTH 6
#define NPROCS 3

static uint64_t rng_state;

static uint64_t rnd(void) /* splitmix64 */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rnd01(void)
{
	return (rnd() >> 11) * (1.0 / 9007199254740992.0);
}

static uint32_t rnd_below(uint32_t n)
{
	return (uint32_t)(rnd01() * n);
}

/* Skewed pick in [0, n): small indexes are much more likely (u^k). */
static uint32_t rnd_skewed(uint32_t n, int k)
{
	double u = rnd01();
	double v = u;

	for (int i = 1; i < k; i++)
		v *= u;
	return (uint32_t)(v * n);
}

static void die(const char *what, long err)
{
	fprintf(stderr, "gen_profile: %s failed: %s\n", what, strerror(err < 0 ? (int)-err : (int)err));
	exit(1);
}

static const char *const words[] = {
    "bitmap", "hash",  "table",	 "alloc",  "insert", "lookup", "parse",	  "emit",   "walk",
    "tree",   "node",  "reg",	 "rtx",	   "expr",   "stmt",   "block",	  "edge",   "loop",
    "vec",    "index", "scan",	 "merge",  "split",  "fold",   "lower",	  "expand", "cost",
    "cache",  "flush", "update", "commit", "decode", "encode", "compress", "match",  "range",
    "set",    "clear", "find",	 "slot",   "dom",    "live",   "df",	  "ssa",    "phi",
};
#define NWORDS (sizeof(words) / sizeof(words[0]))

static const char *const kwords[] = {
    "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "asm_exc_page_fault", "exc_page_fault",
    "handle_mm_fault", "__handle_mm_fault",		 "clear_page_erms",	"vfs_read",
    "ksys_read",      "__x64_sys_read",			 "filemap_read",	"copy_user_generic",
};
#define NKWORDS (sizeof(kwords) / sizeof(kwords[0]))

/* Function name number i: C names, C++ methods, templates, clones; a few long ones. */
static void func_name(char *out, size_t len, uint32_t i, uint32_t nfunc, uint32_t nkernel)
{
	const char *a = words[i % NWORDS], *b = words[(i / NWORDS) % NWORDS];
	const char *c = words[(i * 7 + 3) % NWORDS];

	if (i >= nfunc - nkernel) {
		uint32_t k = i - (nfunc - nkernel);

		if (k < NKWORDS)
			snprintf(out, len, "%s", kwords[k]);
		else
			snprintf(out, len, "__%s_%s_k%u", a, b, k);
		return;
	}
	switch (i % 6) {
	case 0:
	case 1:
		snprintf(out, len, "%s_%s_%s_%u", a, b, c, i);
		break;
	case 2:
		snprintf(out, len, "ns%u::%s_%s::%s_%u", i % 17, a, b, c, i);
		break;
	case 3:
		snprintf(out, len, "hash_table<%s_%s_hasher, false, xcallocator>::find_%s_%u", a, b, c,
			 i);
		break;
	case 4:
		snprintf(out, len, "%s_%s_%u [clone .isra.0]", a, c, i);
		break;
	default:
		if (i % 60 == 5)
			snprintf(out, len,
				 "std::_Rb_tree<std::__cxx11::basic_string<char, std::char_traits<char>, "
				 "std::allocator<char> >, std::pair<std::__cxx11::basic_string<char> const, "
				 "%s_%s_%u>, std::_Select1st<...>, std::less<...> >::_M_insert_unique",
				 a, b, i);
		else
			snprintf(out, len, "(anonymous namespace)::pass_%s::execute_%u", a, i);
	}
}

struct gen {
	struct profile *p;
	uint32_t nfunc, nkernel;
	uint32_t *func_loc;  /* first location id of function f (LOCS_PER_FUNC in a row) */
	uint32_t *unsym_loc; /* unsymbolized locations in a stripped module */
	uint32_t nunsym;
};

static uint32_t add_loc(struct gen *g, int64_t obj, uint64_t addr, const char *name,
			const char *module, const char *inlined, uint8_t kind)
{
	struct profile *p = g->p;
	int64_t loc = profile__location(p, (uint32_t)obj, addr);
	struct location *l;
	struct frame *f;

	if (loc <= 0)
		die("profile__location", loc);
	l = &p->locations.v[loc];
	if (!name || l->frame_n)
		return (uint32_t)loc;
	/* As symbolization does: frames of a location in a row, leaf (inlined) first. */
	l->frame_first = (uint32_t)p->frames.n;
	if (inlined) {
		f = vec_push(p->frames);
		if (!f)
			die("vec_push", ENOMEM);
		f->name = profile__intern(p, inlined);
		f->module = profile__intern(p, module);
		f->file = profile__intern(p, "src/inline.h");
		f->line = 40 + (uint32_t)(addr & 0xff);
		f->kind = kind;
		f->inlined = 1;
		l = &p->locations.v[loc];
		l->frame_n++;
	}
	f = vec_push(p->frames);
	if (!f)
		die("vec_push", ENOMEM);
	f->name = profile__intern(p, name);
	f->module = profile__intern(p, module);
	f->file = kind == FRAME_KERNEL ? 0 : profile__intern(p, "src/generated.c");
	f->line = kind == FRAME_KERNEL ? 0 : 100 + (uint32_t)(addr & 0xfff);
	f->kind = kind;
	l = &p->locations.v[loc];
	l->frame_n++;
	return (uint32_t)loc;
}

static void make_functions(struct gen *g)
{
	struct profile *p = g->p;
	int64_t objs[NMODULES], kobj, sobj;
	char path[128], mod[64], name[512], inl[512];

	for (int m = 0; m < NMODULES; m++) {
		snprintf(path, sizeof(path), m ? "/usr/lib/x86_64-linux-gnu/libbench%02d.so.1" :
						 "/usr/bin/bench-app",
			 m);
		snprintf(mod, sizeof(mod), "%02x%030d", m, m); /* a fake build-id */
		objs[m] = profile__object(p, OBJ_ELF, path, mod, 0);
		if (objs[m] <= 0)
			die("profile__object", objs[m]);
	}
	kobj = profile__object(p, OBJ_KERNEL, "[kernel.kallsyms]", "", 0);
	sobj = profile__object(p, OBJ_ELF, "/usr/lib/x86_64-linux-gnu/libstripped.so.5", "", 0);
	if (kobj <= 0 || sobj <= 0)
		die("profile__object", kobj <= 0 ? kobj : sobj);

	g->func_loc = calloc(g->nfunc, sizeof(*g->func_loc));
	if (!g->func_loc)
		die("calloc", ENOMEM);
	for (uint32_t f = 0; f < g->nfunc; f++) {
		bool kernel = f >= g->nfunc - g->nkernel;
		int m = (int)(f % NMODULES);
		const char *module;

		func_name(name, sizeof(name), f, g->nfunc, g->nkernel);
		if (kernel) {
			module = "[kernel]";
		} else {
			snprintf(mod, sizeof(mod), m ? "libbench%02d.so.1" : "bench-app", m);
			module = mod;
		}
		for (int k = 0; k < LOCS_PER_FUNC; k++) {
			uint64_t addr = kernel ? 0xffffffff81000000ull + (uint64_t)f * 0x200 + k * 0x18 :
						 0x1000 + (uint64_t)(f / NMODULES) * 0x400 + k * 0x24;
			const char *inlined = NULL;

			if (!kernel && (f * LOCS_PER_FUNC + k) % 8 == 5) {
				func_name(inl, sizeof(inl), (f * 31 + k) % (g->nfunc - g->nkernel), g->nfunc,
					  g->nkernel);
				inlined = inl;
			}
			uint32_t loc = add_loc(g, kernel ? kobj : objs[m], addr, name, module, inlined,
					       kernel ? FRAME_KERNEL : FRAME_USER);
			if (k == 0)
				g->func_loc[f] = loc;
		}
	}
	g->nunsym = 500;
	g->unsym_loc = calloc(g->nunsym, sizeof(*g->unsym_loc));
	if (!g->unsym_loc)
		die("calloc", ENOMEM);
	for (uint32_t i = 0; i < g->nunsym; i++)
		g->unsym_loc[i] = add_loc(g, sobj, 0x15000 + (uint64_t)i * 0x31, NULL, NULL, NULL, 0);
}

static uint32_t kobj_id(const struct gen *g)
{
	return g->p->locations.v[g->func_loc[g->nfunc - 1]].object;
}

static uint32_t user_loc(struct gen *g, uint32_t skew_k)
{
	uint32_t f = rnd_skewed(g->nfunc - g->nkernel, (int)skew_k);

	return g->func_loc[f] + rnd_below(LOCS_PER_FUNC);
}

static uint32_t kernel_loc(struct gen *g, uint32_t depth)
{
	/* entry first, then a random kernel function */
	uint32_t base = g->nfunc - g->nkernel;
	uint32_t f = depth < 2 ? base + depth : base + 2 + rnd_below(g->nkernel - 2);

	return g->func_loc[f] + rnd_below(LOCS_PER_FUNC);
}

static void usage(void)
{
	fprintf(stderr, "usage: gen_profile -o FILE [-n SAMPLES] [-s STACKS] [-f FUNCS] "
			"[-t THREADS] [-S SEED] [-m MAPS] [-r RANK -w WORLD [-c COLLS]]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	uint64_t nsamples = 1000000;
	uint32_t nstacks = 100000, nfunc = 5000, nthreads = 8;
	uint64_t seed = 42, nmaps = 0, ncolls = 0;
	int opt, rank = -1, world = 0;

	while ((opt = getopt(argc, argv, "o:n:s:f:t:S:m:r:w:c:h")) != -1) {
		switch (opt) {
		case 'o': out = optarg; break;
		case 'n': nsamples = strtoull(optarg, NULL, 0); break;
		case 's': nstacks = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'f': nfunc = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 't': nthreads = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'S': seed = strtoull(optarg, NULL, 0); break;
		case 'm': nmaps = strtoull(optarg, NULL, 0); break;
		case 'r': rank = atoi(optarg); break;
		case 'w': world = atoi(optarg); break;
		case 'c': ncolls = strtoull(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (!out || nstacks < 1 || nfunc < 100 || nthreads < NPROCS || nsamples < nstacks ||
	    (rank >= 0 && (world <= rank)))
		usage();
	rng_state = seed;

	struct gen g = { .nfunc = nfunc, .nkernel = nfunc / 25 };
	struct profile *p = profile__new();
	struct eprof_writer *w;

	if (!p)
		die("profile__new", ENOMEM);
	g.p = p;
	w = eprof_writer__open(out);
	if (!w)
		die(out, errno);

	/* Metadata as record sets it. */
	const uint64_t start_ns = 1000000000000ull, period = 1001001; /* 999 Hz */
	const uint32_t ncpus = 2;
	uint64_t end_ns = start_ns + nsamples * period / ncpus;
	char buf[64];

	profile__set_meta(p, "command", "gen_profile (synthetic)");
	profile__set_meta(p, "hostname", "synthetic");
	profile__set_meta(p, "kernel", "6.1.0-synthetic");
	profile__set_meta(p, "arch", "x86_64");
	profile__set_meta(p, "eprof_version", "synthetic");
	profile__set_meta(p, "sample_rate", "999");
	snprintf(buf, sizeof(buf), "%u", ncpus);
	profile__set_meta(p, "ncpus", buf);
	profile__set_meta(p, "call_graph", "dwarf");
	profile__set_meta(p, "target", "launch");
	snprintf(buf, sizeof(buf), "%" PRIu64, start_ns);
	profile__set_meta(p, "start_ns", buf);
	profile__set_meta(p, "start_time", "2024-01-01T00:00:00Z");

	/* Processes and threads: thread t belongs to process t % NPROCS. */
	uint32_t *tids = calloc(nthreads, sizeof(*tids));
	if (!tids)
		die("calloc", ENOMEM);
	for (uint32_t pi = 0; pi < NPROCS; pi++) {
		struct process *pr = profile__proc(p, 1000 * (pi + 1), true);

		if (!pr)
			die("profile__proc", ENOMEM);
		pr->ppid = 1;
		snprintf(buf, sizeof(buf), "bench-app%u", pi);
		pr->comm = profile__intern(p, buf);
		snprintf(buf, sizeof(buf), "/usr/bin/bench-app --worker %u", pi);
		pr->cmdline = profile__intern(p, buf);
		pr->start_ts = start_ns;
		pr->exit_ts = end_ns;
	}
	for (uint32_t t = 0; t < nthreads; t++) {
		uint32_t pid = 1000 * (t % NPROCS + 1);
		struct thread *th;

		tids[t] = t < NPROCS ? pid : pid + t;
		th = profile__thread(p, pid, tids[t], true);
		if (!th)
			die("profile__thread", ENOMEM);
		snprintf(buf, sizeof(buf), t < NPROCS ? "bench-app%u" : "worker-%u", t);
		th->comm = profile__intern(p, buf);
	}

	make_functions(&g);

	/* Unique stacks: most extend a cut of an earlier one, some start afresh. */
	uint32_t *leaf = calloc(nstacks, sizeof(*leaf));
	uint32_t (*paths)[MAX_DEPTH] = calloc(nstacks, sizeof(*paths));
	uint8_t *plen = calloc(nstacks, 1);
	uint8_t *used = NULL;
	size_t used_cap = 0;
	uint32_t roots[3] = { user_loc(&g, 8), user_loc(&g, 8), user_loc(&g, 8) };
	uint64_t retries = 0;

	if (!leaf || !paths || !plen)
		die("calloc", ENOMEM);
	for (uint32_t s = 0; s < nstacks;) {
		uint32_t *path = paths[s];
		uint32_t depth = MIN_DEPTH + rnd_below(MAX_DEPTH - MIN_DEPTH + 1), n = 0;
		uint32_t kdepth = rnd01() < 0.2 ? 2 + rnd_below(MAX_KDEPTH - 1) : 0;
		uint32_t udepth = depth - kdepth;

		if (s > 0 && rnd01() < 0.85) {
			uint32_t from = rnd_skewed(s, 2);
			uint32_t ulen = plen[from];

			/* a cut of the user part of an earlier stack (its kernel frames are last) */
			while (ulen > 0 && p->locations.v[paths[from][ulen - 1]].object == kobj_id(&g))
				ulen--;
			n = 3 + rnd_below(ulen > 4 ? ulen - 3 : 1);
			if (n > ulen)
				n = ulen;
			if (n > udepth - 1)
				n = udepth - 1;
			memcpy(path, paths[from], n * sizeof(*path));
		} else {
			path[n++] = roots[s % 3];
			path[n++] = user_loc(&g, 8);
		}
		while (n < udepth)
			path[n++] = user_loc(&g, 2);
		if (!kdepth && rnd01() < 0.03)
			path[n - 1] = g.unsym_loc[rnd_below(g.nunsym)];
		for (uint32_t k = 0; k < kdepth; k++)
			path[n++] = kernel_loc(&g, k);

		int64_t node = profile__stack(p, path, n);

		if (node <= 0)
			die("profile__stack", node);
		if ((size_t)node >= used_cap) {
			size_t cap = used_cap ? used_cap : 1 << 20;

			while (cap <= (size_t)node)
				cap *= 2;
			used = realloc(used, cap);
			if (!used)
				die("realloc", ENOMEM);
			memset(used + used_cap, 0, cap - used_cap);
			used_cap = cap;
		}
		if (used[node]) { /* the same stack again: draw another */
			retries++;
			continue;
		}
		used[node] = 1;
		leaf[s] = (uint32_t)node;
		plen[s] = (uint8_t)n;
		s++;
	}

	/* Samples: every stack at least once, then skewed toward a few hot ones. */
	uint64_t covered = 0;

	for (uint64_t i = 0; i < nsamples; i++) {
		uint32_t s;
		struct sample smp;

		if (covered < nstacks && (i % (nsamples / nstacks) == 0 || nsamples - i <= nstacks - covered))
			s = (uint32_t)covered++;
		else
			s = rnd01() < 0.6 ? rnd_skewed(nstacks, 4) : rnd_below(nstacks);
		/* a stack belongs to one process (s % NPROCS); any of its threads runs it */
		uint32_t pi = s % NPROCS, nt = (nthreads - pi + NPROCS - 1) / NPROCS;
		uint32_t t = pi + NPROCS * rnd_below(nt);

		smp = (struct sample){ .ts = start_ns + i * period / ncpus,
				       .pid = 1000 * (t % NPROCS + 1),
				       .tid = tids[t],
				       .cpu = (uint32_t)(i % ncpus),
				       .stack = leaf[s],
				       .weight = period };
		if (profile__add_sample(p, &smp))
			die("profile__add_sample", ENOMEM);
		if ((i + 1) % 100000 == 0) { /* as record does: flush, drop the samples */
			int err = eprof_writer__flush(w, p);

			if (err)
				die("eprof_writer__flush", err);
			eprof_writer__forget_samples(w, p);
		}
	}
	/* A rank's metadata and its collectives (the last rank late at each). */
	if (rank >= 0) {
		const uint64_t host = (uint64_t)rank / 8, skew = host * 1000000;

		snprintf(buf, sizeof(buf), "%d", rank);
		profile__set_meta(p, "rank", buf);
		snprintf(buf, sizeof(buf), "%d", rank % 8);
		profile__set_meta(p, "local_rank", buf);
		snprintf(buf, sizeof(buf), "%d", world);
		profile__set_meta(p, "world_size", buf);
		profile__set_meta(p, "job_id", "synthetic");
		snprintf(buf, sizeof(buf), "host%" PRIu64, host);
		profile__set_meta(p, "hostname", buf);
		snprintf(buf, sizeof(buf), "%" PRIu64, start_ns);
		profile__set_meta(p, "clock_monotonic_ns", buf);
		snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t)(1700000000000000000ull + start_ns + skew));
		profile__set_meta(p, "clock_realtime_ns", buf);
	}
	for (uint64_t k = 0; rank >= 0 && k < ncolls; k++) {
		uint64_t t = start_ns + (k + 1) * (end_ns - start_ns) / (ncolls + 1);
		uint64_t arrive = t + (rank == world - 1 ? 5000000 : (uint64_t)rank * 10000);
		struct event e = { .ts = arrive, .dur = t + 6000000 - arrive, .pid = 1000,
				   .tid = tids[0], .kind = EVK_REGION,
				   .name = profile__intern(p, "MPI_Allreduce"),
				   .flags = EVF_REGION_COMM | EVF_REGION_COLL,
				   .b = 1 << 20, .c = 1 };

		if (profile__add_event(p, &e))
			die("profile__add_event", ENOMEM);
	}
	/* Mappings: top-down one page apart, spread over the run, in the first process. */
	for (uint64_t i = 0; i < nmaps; i++) {
		struct event e = { .ts = start_ns + i * (end_ns - start_ns) / (nmaps + 1),
				   .pid = 1000, .tid = 1000, .kind = EVK_MMAP,
				   .a = 0x7f0000000000ull - (i + 1) * 8192, .b = 4096 };

		if (profile__add_event(p, &e))
			die("profile__add_event", ENOMEM);
	}
	snprintf(buf, sizeof(buf), "%" PRIu64, end_ns);
	profile__set_meta(p, "end_ns", buf);
	profile__set_meta(p, "stop_reason", "exit");

	size_t nlocs = p->locations.n - 1, nnodes = p->stacks.n - 1;
	int err = eprof_writer__finish(w, p);

	if (err)
		die("eprof_writer__finish", err);
	fprintf(stderr,
		"gen_profile: %s: %" PRIu64 " samples, %u unique stacks (%" PRIu64
		" redrawn), %zu stack nodes, %zu locations, %u functions, %u threads\n",
		out, nsamples, nstacks, retries, nnodes, nlocs, nfunc, nthreads);
	free(tids);
	free(leaf);
	free(paths);
	free(plen);
	free(used);
	free(g.func_loc);
	free(g.unsym_loc);
	profile__free(p);
	return 0;
}
