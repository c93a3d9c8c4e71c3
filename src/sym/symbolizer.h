/* SPDX-License-Identifier: MIT */
/*
 * Symbolizer: addresses -> function, source file, line and inline frames.
 * Every path comes in as a parameter, so tests can use fixture files.
 */
#ifndef EPROF_SYMBOLIZER_H
#define EPROF_SYMBOLIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sym_frame {
	char *name; /* demangled, parameter list stripped ("ns::Cls::method") */
	char *file; /* source file or NULL */
	uint32_t line; /* 0 when unknown */
	bool inlined;  /* this frame was inlined into the next one in the array */
};

/* Frames of one address, innermost (leaf) first: inlined callees, then the real function. */
struct sym_result {
	struct sym_frame *frames;
	uint32_t n;
};

struct symbolizer_opts {
	const char *kallsyms_path; /* default "/proc/kallsyms" */
	const char *debug_dir;	   /* default "/usr/lib/debug" (build-id and debuglink search) */
	bool want_lines;	   /* file/line and inline frames (needs DWARF) */
	bool use_debuginfod;	   /* query debuginfod when DEBUGINFOD_URLS is set */
	bool use_cache;		   /* objects' symbol tables in the build-id cache
				      (util/bidcache.h, set up by the caller) */
};

struct symbolizer;

struct symbolizer *symbolizer__new(const struct symbolizer_opts *opts);
void symbolizer__free(struct symbolizer *s);
/* A perf map is read only up to this size, and lines up to this length (longer: skipped). */
#define PERFMAP_MAX (256 << 20)
#define PERFMAP_LINE_MAX (64 << 10)


/*
 * A user-space ELF object. path: a path that can be opened now (may be
 * "/proc/PID/root/usr/lib/...", or "/proc/self/fd/N" for a kept handle).
 * build_id: lower-case hex or NULL/"" (used to find separate debug info).
 * file_off: FILE OFFSET of the instruction in that file (not a vaddr).
 * Returns 0 with out filled, -ENOENT when no symbol covers it, other -errno.
 */
int symbolizer__elf(struct symbolizer *s, const char *path, const char *build_id,
		    uint64_t file_off, struct sym_result *out);
/* Starts reading kallsyms in a background thread; the first kernel lookup waits for it. */
int symbolizer__preload_kernel(struct symbolizer *s);
/* Kernel text and modules from kallsyms: the function name (the module: symbolizer__kernel_module). */
int symbolizer__kernel(struct symbolizer *s, uint64_t addr, struct sym_result *out);
/* Module name ("ext4") of a kernel address, or NULL for core kernel / unknown. */
const char *symbolizer__kernel_module(struct symbolizer *s, uint64_t addr);
/* JIT code from a perf map file ("START SIZE name" lines, hex). */
int symbolizer__perfmap(struct symbolizer *s, const char *map_path, uint64_t addr,
			struct sym_result *out);
/* The vDSO: off is the offset from the start of the vDSO mapping. */
int symbolizer__vdso(struct symbolizer *s, uint64_t off, struct sym_result *out);

void sym_result__free(struct sym_result *r);

/* Reads the GNU build-id note of an ELF file as lower-case hex. Returns 0 or -errno. */
int elf_read_build_id(const char *path, char *hex, size_t hexlen);
/* Demangles a C++/Rust symbol and strips its parameter list; returns a malloc'd string. */
char *sym_demangle(const char *mangled);
/* Strips the parameter list (and trailing qualifiers) from a demangled name, in place. */
void sym_strip_params(char *name);

#endif
