/* SPDX-License-Identifier: MIT */
/*
 * Stack views (--view): what a Python user reads of a mixed stack. `mixed` is the stack as
 * recorded; `python` keeps its Python frames (but the import machinery's, VC_PY_IMPORT), its
 * synthetic frames ([GIL], [truncated]...) and
 * its native leaf (the innermost native frame, where the time or the allocation happened,
 * when no Python frame lies below it); `native` drops the Python frames. One rule, applied to
 * the profile's stacks before any analysis reads them, so every command shows the same view.
 */
#ifndef EPROF_ANALYSIS_VIEW_H
#define EPROF_ANALYSIS_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/profile.h"

enum stack_view { VIEW_MIXED = 0, VIEW_PYTHON = 1, VIEW_NATIVE = 2 };

/*
 * What the rule looks at in a frame or a location. VC_PY_IMPORT: a Python frame of the import
 * machinery (`<frozen importlib._bootstrap>`, `..._external>`): five or six of them between
 * each module and the one it imports, so an import chain read 116 frames deep on a PyTorch
 * job; the python view keeps one only as a stack's innermost Python frame (time spent in the
 * import itself: `_compile_bytecode`). VC_INTERP: a native location in CPython's frame
 * evaluation (`_PyEval_EvalFrameDefault`, `_PyEvalFrameClearAndPop`, `PyEval_EvalCode`):
 * where it is the leaf, the time is the innermost Python line's own, so the python view
 * drops it (and keeps it only in a stack with no Python frame to carry the time).
 */
enum view_class { VC_NATIVE = 0, VC_PYTHON = 1, VC_SPECIAL = 2, VC_PY_IMPORT = 3, VC_INTERP = 4 };

/* The class of location loc (by its object, then its first frame). */
enum view_class view_loc_class(const struct profile *p, uint32_t loc);

/*
 * The rule: keep[i] for each of n items of classes cls[] (ROOT first) in view v.
 * Returns how many are kept.
 */
size_t view_select(enum stack_view v, const uint8_t *cls, size_t n, bool *keep);

/*
 * The locations of stack node `node` in view v, ROOT first, into locs; cls and keep are
 * scratch. Each array holds PROFILE_MAX_STACK_DEPTH entries. Returns how many.
 */
size_t view_stack_locs(const struct profile *p, enum stack_view v, uint32_t node, uint32_t *locs,
		       uint8_t *cls, bool *keep);

/*
 * Puts every sample's and event's stacks (stack and stack2) into view v: the stacks of the
 * view are added to the trie and the samples and events point at them. VIEW_MIXED changes
 * nothing. Returns 0 or -ENOMEM / -EINVAL.
 */
int profile_apply_view(struct profile *p, enum stack_view v);

/* "python", "mixed", "native" -> view; -EINVAL for anything else. */
int view_parse(const char *s);
const char *view_name(enum stack_view v);

#endif
