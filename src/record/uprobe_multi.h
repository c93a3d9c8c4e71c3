/* SPDX-License-Identifier: MIT */
/*
 * uprobe_multi links (Linux 6.6+) and uprobe sessions (6.13+): many probes of one file in one
 * link. Detaching per-probe links costs an RCU grace period each (60-100 ms here: seconds for
 * a library's worth of probes); a multi link detaches all at once. libbpf 1.1 has no API for
 * them, so the link is made with BPF_LINK_CREATE directly.
 */
#ifndef EPROF_UPROBE_MULTI_H
#define EPROF_UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>

/* expected_attach_type of a program attached through these links */
#define UPROBE_MULTI_ATTACH 48	 /* BPF_TRACE_UPROBE_MULTI */
#define UPROBE_SESSION_ATTACH 57 /* BPF_TRACE_UPROBE_SESSION */

enum uprobe_multi_kind {
	UPROBE_MULTI_ENTRY,
	UPROBE_MULTI_RETURN,
	UPROBE_MULTI_SESSION,
};

/* Whether the running kernel is at least maj.min. */
bool kernel_at_least(int maj, int min);
/*
 * One link for cnt probes of path (file offsets, with a cookie each), in process pid (0: all).
 * Returns the link's fd, or -1 with errno set.
 */
int uprobe_multi_link(int prog_fd, enum uprobe_multi_kind kind, const char *path,
		      const uint64_t *offs, const uint64_t *cookies, uint32_t cnt, uint32_t pid);

#endif
