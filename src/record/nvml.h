/* SPDX-License-Identifier: MIT */
/*
 * NVIDIA GPU device figures through NVML (libnvidia-ml.so.1), loaded with dlopen: no link-time
 * dependency, and a machine without the driver simply has no GPU metrics.
 * EPROF_NVML_LIB names another library (tests use a fake one).
 */
#ifndef EPROF_NVML_H
#define EPROF_NVML_H

#include <stdint.h>

struct nvml;

/* NULL when there is no NVML or no device (the reason at -v). */
struct nvml *nvml_open(void);
unsigned nvml_count(const struct nvml *n);
const char *nvml_name(const struct nvml *n, unsigned dev);
const char *nvml_driver(const struct nvml *n);
/*
 * Reads device dev into v[] indexed by enum metric_id (MET_GPU_*); returns the bit mask
 * (1 << id) of the figures read: a query the device does not support leaves its bit clear.
 */
uint64_t nvml_read(struct nvml *n, unsigned dev, uint64_t *v);
void nvml_close(struct nvml *n);

#endif
