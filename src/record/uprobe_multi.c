// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "uprobe_multi.h"

#define BPF_LINK_CREATE_CMD 28
#define BPF_F_UPROBE_MULTI_RETURN_FLAG 1

bool kernel_at_least(int want_maj, int want_min)
{
	struct utsname u;
	int maj = 0, min = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &maj, &min) != 2)
		return false;
	return maj > want_maj || (maj == want_maj && min >= want_min);
}

int uprobe_multi_link(int prog_fd, enum uprobe_multi_kind kind, const char *path,
		      const uint64_t *offs, const uint64_t *cookies, uint32_t cnt, uint32_t pid)
{
	/* union bpf_attr's link_create.uprobe_multi, padded to the size the kernel reads */
	union {
		uint64_t raw[16];
		struct {
			uint32_t prog_fd, target_fd, attach_type, flags;
			uint64_t path, offsets, ref_ctr_offsets, cookies;
			uint32_t cnt, flags2, pid;
		} lc;
	} attr;

	memset(&attr, 0, sizeof(attr));
	attr.lc.prog_fd = (uint32_t)prog_fd;
	attr.lc.attach_type =
	    kind == UPROBE_MULTI_SESSION ? UPROBE_SESSION_ATTACH : UPROBE_MULTI_ATTACH;
	attr.lc.path = (uintptr_t)path;
	attr.lc.offsets = (uintptr_t)offs;
	attr.lc.cookies = (uintptr_t)cookies;
	attr.lc.cnt = cnt;
	attr.lc.flags2 = kind == UPROBE_MULTI_RETURN ? BPF_F_UPROBE_MULTI_RETURN_FLAG : 0;
	attr.lc.pid = pid;
	return (int)syscall(__NR_bpf, BPF_LINK_CREATE_CMD, &attr, sizeof(attr));
}
