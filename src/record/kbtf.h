/* SPDX-License-Identifier: MIT */
/*
 * What the running kernel has, read from the names in its BTF's string table: a tracepoint
 * X exists exactly when the typedef btf_trace_X does, a kfunc when its function does.
 * Parsing the whole of /sys/kernel/btf/vmlinux (btf__load_vmlinux_btf) for such a question
 * cost 8-30 ms of a record's start-up; the string table is read and searched instead.
 */
#ifndef EPROF_KBTF_H
#define EPROF_KBTF_H

#include <stdbool.h>
#include <stddef.h>

#define KBTF_VMLINUX "/sys/kernel/btf/vmlinux"

/* Whether the NUL-separated string table strs[0..len) holds name as one of its strings. */
bool kbtf_strtab_has(const char *strs, size_t len, const char *name);

/*
 * For each of names[0..n), whether the BTF file at path has it among its strings
 * (found[i]). Returns 0, or -errno (-EINVAL: not BTF, or sections out of the file).
 */
int kbtf_has_names(const char *path, const char *const *names, size_t n, bool *found);

#endif
