/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The GPU's PCIe link, for the paper sketch's copy bandwidth. */
#ifndef DLBPF_PCIE_H
#define DLBPF_PCIE_H

#include <stdint.h>

/* The fastest NVIDIA GPU's PCIe link in sysfs, in MB/s; 0 when there is none. */
uint32_t dl_gpu_pcie_mbps(void);
/* A link's bandwidth from sysfs current_link_speed ("16.0 GT/s PCIe") and width ("16"); 0 if unreadable. */
double dl_pcie_link_mbps(const char *speed, const char *width);

#endif
