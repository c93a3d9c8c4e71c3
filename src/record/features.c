// SPDX-License-Identifier: MIT
#include <stddef.h>

#include "feature.h"

/* One line per feature; each is defined in its own file of src/record/. */
extern const struct feature feature_python;

const struct feature *const record_features[] = {
	&feature_python,
	NULL,
};
