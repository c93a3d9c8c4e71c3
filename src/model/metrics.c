// SPDX-License-Identifier: MIT
#include <string.h>

#include "metrics.h"

#define P MSCOPE_PROCESS
#define G MSCOPE_GPU
#define T MSCOPE_THREAD

const struct metric_def metric_defs[MET_COUNT] = {
    [MET_CPU_USER] = {"cpu_user_ns", "ns", P, true, "CPU user"},
    [MET_CPU_SYS] = {"cpu_sys_ns", "ns", P, true, "CPU system"},
    [MET_RSS_ANON] = {"rss_anon_bytes", "bytes", P, false, "RSS anonymous"},
    [MET_RSS_FILE] = {"rss_file_bytes", "bytes", P, false, "RSS file"},
    [MET_RSS_SHMEM] = {"rss_shmem_bytes", "bytes", P, false, "RSS shared memory"},
    [MET_RSS_PEAK] = {"rss_peak_bytes", "bytes", P, false, "RSS peak (VmHWM)"},
    [MET_MINFLT] = {"minflt", "count", P, true, "minor faults"},
    [MET_MAJFLT] = {"majflt", "count", P, true, "major faults"},
    [MET_NVCSW] = {"nvcsw", "count", P, true, "voluntary context switches"},
    [MET_NIVCSW] = {"nivcsw", "count", P, true, "involuntary context switches"},
    [MET_IO_RCHAR] = {"io_rchar", "bytes", P, true, "read (syscalls)"},
    [MET_IO_WCHAR] = {"io_wchar", "bytes", P, true, "written (syscalls)"},
    [MET_IO_READ_BYTES] = {"io_read_bytes", "bytes", P, true, "read (block layer)"},
    [MET_IO_WRITE_BYTES] = {"io_write_bytes", "bytes", P, true, "written (block layer)"},
    [MET_NET_TCP_TX] = {"net_tcp_tx_bytes", "bytes", P, true, "TCP sent"},
    [MET_NET_TCP_RX] = {"net_tcp_rx_bytes", "bytes", P, true, "TCP received"},
    [MET_NET_UDP_TX] = {"net_udp_tx_bytes", "bytes", P, true, "UDP sent"},
    [MET_NET_UDP_RX] = {"net_udp_rx_bytes", "bytes", P, true, "UDP received"},
    [MET_NET_UNIX_TX] = {"net_unix_tx_bytes", "bytes", P, true, "Unix socket sent"},
    [MET_NET_UNIX_RX] = {"net_unix_rx_bytes", "bytes", P, true, "Unix socket received"},
    [MET_THREADS] = {"threads", "count", P, false, "threads"},
    [MET_ENERGY_UJ] = {"energy_uj", "uJ", MSCOPE_ENERGY, true, "energy"},
    [MET_GPU_UTIL] = {"gpu_util_pct", "pct", G, false, "SM utilisation"},
    [MET_GPU_MEM_UTIL] = {"gpu_mem_util_pct", "pct", G, false, "memory utilisation"},
    [MET_GPU_MEM_USED] = {"gpu_mem_used_bytes", "bytes", G, false, "memory used"},
    [MET_GPU_MEM_TOTAL] = {"gpu_mem_total_bytes", "bytes", G, false, "memory total"},
    [MET_GPU_POWER_MW] = {"gpu_power_mw", "mW", G, false, "power"},
    [MET_GPU_ENERGY_MJ] = {"gpu_energy_mj", "mJ", G, true, "energy"},
    [MET_GPU_TEMP_C] = {"gpu_temp_c", "C", G, false, "temperature"},
    [MET_GPU_SM_CLOCK] = {"gpu_sm_clock_mhz", "MHz", G, false, "SM clock"},
    [MET_GPU_MEM_CLOCK] = {"gpu_mem_clock_mhz", "MHz", G, false, "memory clock"},
    [MET_GPU_THROTTLE] = {"gpu_throttle_reasons", "mask", G, false, "throttle reasons"},
    [MET_GPU_PCIE_TX] = {"gpu_pcie_tx_kbps", "KBps", G, false, "PCIe TX"},
    [MET_GPU_PCIE_RX] = {"gpu_pcie_rx_kbps", "KBps", G, false, "PCIe RX"},
    [MET_T_CPU_USER] = {"thread_cpu_user_ns", "ns", T, true, "CPU user"},
    [MET_T_CPU_SYS] = {"thread_cpu_sys_ns", "ns", T, true, "CPU system"},
    [MET_T_MINFLT] = {"thread_minflt", "count", T, true, "minor faults"},
    [MET_T_MAJFLT] = {"thread_majflt", "count", T, true, "major faults"},
    [MET_T_NVCSW] = {"thread_nvcsw", "count", T, true, "voluntary context switches"},
    [MET_T_NIVCSW] = {"thread_nivcsw", "count", T, true, "involuntary context switches"},
    [MET_T_IO_RCHAR] = {"thread_io_rchar", "bytes", T, true, "read (syscalls)"},
    [MET_T_IO_WCHAR] = {"thread_io_wchar", "bytes", T, true, "written (syscalls)"},
    [MET_T_IO_READ_BYTES] = {"thread_io_read_bytes", "bytes", T, true, "read (block layer)"},
    [MET_T_IO_WRITE_BYTES] = {"thread_io_write_bytes", "bytes", T, true, "written (block layer)"},
    [MET_T_NET_TX] = {"thread_net_tx_bytes", "bytes", T, true, "socket bytes sent"},
    [MET_T_NET_RX] = {"thread_net_rx_bytes", "bytes", T, true, "socket bytes received"},
};

int metric_by_name(const char *name)
{
	for (int i = 0; i < MET_COUNT; i++)
		if (!strcmp(metric_defs[i].name, name))
			return i;
	return -1;
}

/* The system part of rtime in the ratio of the ticks; no tick at all: all user (the kernel's). */
static uint64_t sys_share(uint64_t utime, uint64_t stime, uint64_t rtime)
{
	if (!stime)
		return 0;
	if (!utime)
		return rtime;
	return (uint64_t)((unsigned __int128)stime * rtime / (stime + utime));
}

void cpu_split_update(struct cpu_split *c, uint64_t utime, uint64_t stime, uint64_t rtime,
		      bool final)
{
	uint64_t s;

	if (final) {
		c->sys = sys_share(utime, stime, rtime);
		c->user = rtime - c->sys;
		return;
	}
	if (c->user + c->sys >= rtime || (!utime && !stime))
		return;
	s = sys_share(utime, stime, rtime);
	if (s < c->sys)
		s = c->sys;
	if (rtime - s < c->user)
		s = rtime - c->user;
	c->sys = s;
	c->user = rtime - s;
}
