// SPDX-License-Identifier: MIT
/*
 * NVML through dlopen (nvml.h). Only the handful of entry points read here, declared with
 * the types of NVML's C API (every function returns nvmlReturn_t, 0 = NVML_SUCCESS; a device
 * is an opaque pointer).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/metrics.h"
#include "util/log.h"
#include "nvml.h"

#define NVML_MAX_DEVICES 64
#define NVML_NAME_LEN 96

typedef void *nvml_dev;
struct nvml_util {
	unsigned gpu, memory; /* percent of the last sample period */
};
struct nvml_mem {
	unsigned long long total, free, used; /* bytes */
};

struct nvml {
	void *lib;
	int (*shutdown)(void);
	int (*utilization)(nvml_dev, struct nvml_util *);
	int (*memory)(nvml_dev, struct nvml_mem *);
	int (*power)(nvml_dev, unsigned *);		 /* mW */
	int (*energy)(nvml_dev, unsigned long long *);	 /* mJ since the driver loaded */
	int (*temperature)(nvml_dev, int, unsigned *);	 /* sensor 0: the GPU die, C */
	int (*clock)(nvml_dev, int, unsigned *);	 /* 1 SM, 2 memory; MHz */
	int (*throttle)(nvml_dev, unsigned long long *); /* reason bits */
	int (*pcie)(nvml_dev, int, unsigned *);		 /* 0 TX, 1 RX; KB/s */
	unsigned n;
	nvml_dev dev[NVML_MAX_DEVICES];
	char name[NVML_MAX_DEVICES][NVML_NAME_LEN];
	char driver[80];
};

#define SYM(n, field, sym) (*(void **)&(n)->field = dlsym((n)->lib, sym))

struct nvml *nvml_open(void)
{
	const char *path = getenv("EPROF_NVML_LIB") ?: "libnvidia-ml.so.1";
	int (*init)(void), (*count)(unsigned *), (*by_index)(unsigned, nvml_dev *);
	int (*name)(nvml_dev, char *, unsigned), (*driver)(char *, unsigned);
	struct nvml *n = calloc(1, sizeof(*n));
	unsigned c = 0;

	if (!n)
		return NULL;
	n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		log_debug("metrics: no NVML (%s): no GPU device metrics", dlerror());
		goto fail;
	}
	*(void **)&init = dlsym(n->lib, "nvmlInit_v2");
	*(void **)&count = dlsym(n->lib, "nvmlDeviceGetCount_v2");
	*(void **)&by_index = dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&name = dlsym(n->lib, "nvmlDeviceGetName");
	*(void **)&driver = dlsym(n->lib, "nvmlSystemGetDriverVersion");
	SYM(n, shutdown, "nvmlShutdown");
	if (!init || !count || !by_index || !n->shutdown) {
		log_warn("metrics: %s lacks nvmlInit_v2 or the device calls: no GPU metrics", path);
		goto fail;
	}
	if (init()) {
		log_debug("metrics: nvmlInit_v2 failed: no GPU device metrics");
		n->shutdown = NULL;
		goto fail;
	}
	if (count(&c) || !c) {
		log_debug("metrics: NVML sees no device");
		goto fail;
	}
	SYM(n, utilization, "nvmlDeviceGetUtilizationRates");
	SYM(n, memory, "nvmlDeviceGetMemoryInfo");
	SYM(n, power, "nvmlDeviceGetPowerUsage");
	SYM(n, energy, "nvmlDeviceGetTotalEnergyConsumption");
	SYM(n, temperature, "nvmlDeviceGetTemperature");
	SYM(n, clock, "nvmlDeviceGetClockInfo");
	/* renamed "clock event reasons" in CUDA 12.2; the old name stays as an alias */
	if (!SYM(n, throttle, "nvmlDeviceGetCurrentClocksEventReasons"))
		SYM(n, throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
	SYM(n, pcie, "nvmlDeviceGetPcieThroughput");
	for (unsigned i = 0; i < c && n->n < NVML_MAX_DEVICES; i++) {
		if (by_index(i, &n->dev[n->n]))
			continue;
		if (!name || name(n->dev[n->n], n->name[n->n], NVML_NAME_LEN))
			snprintf(n->name[n->n], NVML_NAME_LEN, "GPU %u", i);
		n->name[n->n][NVML_NAME_LEN - 1] = '\0';
		n->n++;
	}
	if (!driver || driver(n->driver, sizeof(n->driver)))
		snprintf(n->driver, sizeof(n->driver), "unknown");
	n->driver[sizeof(n->driver) - 1] = '\0';
	if (!n->n)
		goto fail;
	return n;
fail:
	nvml_close(n);
	return NULL;
}

unsigned nvml_count(const struct nvml *n)
{
	return n ? n->n : 0;
}

const char *nvml_name(const struct nvml *n, unsigned dev)
{
	return dev < n->n ? n->name[dev] : "";
}

const char *nvml_driver(const struct nvml *n)
{
	return n->driver;
}

uint64_t nvml_read(struct nvml *n, unsigned dev, uint64_t *v)
{
	struct nvml_util u;
	struct nvml_mem m;
	unsigned long long ull;
	unsigned x;
	uint64_t have = 0;
	nvml_dev d;

	if (dev >= n->n)
		return 0;
	d = n->dev[dev];
#define GOT(id, val) (v[id] = (val), have |= 1ULL << (id))
	if (n->utilization && !n->utilization(d, &u)) {
		GOT(MET_GPU_UTIL, u.gpu);
		GOT(MET_GPU_MEM_UTIL, u.memory);
	}
	if (n->memory && !n->memory(d, &m)) {
		GOT(MET_GPU_MEM_USED, m.used);
		GOT(MET_GPU_MEM_TOTAL, m.total);
	}
	if (n->power && !n->power(d, &x))
		GOT(MET_GPU_POWER_MW, x);
	if (n->energy && !n->energy(d, &ull))
		GOT(MET_GPU_ENERGY_MJ, ull);
	if (n->temperature && !n->temperature(d, 0, &x))
		GOT(MET_GPU_TEMP_C, x);
	if (n->clock && !n->clock(d, 1, &x))
		GOT(MET_GPU_SM_CLOCK, x);
	if (n->clock && !n->clock(d, 2, &x))
		GOT(MET_GPU_MEM_CLOCK, x);
	if (n->throttle && !n->throttle(d, &ull))
		GOT(MET_GPU_THROTTLE, ull);
	if (n->pcie && !n->pcie(d, 0, &x))
		GOT(MET_GPU_PCIE_TX, x);
	if (n->pcie && !n->pcie(d, 1, &x))
		GOT(MET_GPU_PCIE_RX, x);
#undef GOT
	return have;
}

void nvml_close(struct nvml *n)
{
	if (!n)
		return;
	if (n->shutdown)
		n->shutdown();
	if (n->lib)
		dlclose(n->lib);
	free(n);
}
