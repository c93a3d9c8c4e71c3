// SPDX-License-Identifier: MIT
#include <stddef.h>

#include "feature.h"

extern const struct feature feature_mem;

/* One line per feature; each is defined in its own file of src/record/. */
const struct feature *const record_features[] = {
	&feature_mem,
	NULL,
};
