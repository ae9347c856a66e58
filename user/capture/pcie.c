// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include "capture/pcie.h"

double dl_pcie_link_mbps(const char *speed, const char *width)
{
	double gts;
	int lanes;

	if (sscanf(speed, "%lf GT/s", &gts) != 1 || sscanf(width, "%d", &lanes) != 1 || gts <= 0 || lanes <= 0)
		return 0;
	/* 128b/130b encoding since PCIe 3: GT/s x lanes x 128/130 bits, 8 bits a byte. */
	return gts * lanes * 128 / 130 / 8 * 1000;
}

static int read_attr(const char *dev, const char *attr, char *buf, size_t len)
{
	char path[512];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", dev, attr);
	f = fopen(path, "re");
	if (!f)
		return -1;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok ? 0 : -1;
}

uint32_t dl_gpu_pcie_mbps(void)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *de;
	double best = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char vendor[16], class[16], speed[64], width[16];
		double mbps;

		if (de->d_name[0] == '.' || read_attr(de->d_name, "vendor", vendor, sizeof(vendor)) ||
		    read_attr(de->d_name, "class", class, sizeof(class)))
			continue;
		/* NVIDIA (0x10de) display or 3D controllers (class 0x03xxxx). */
		if (strtoul(vendor, NULL, 16) != 0x10de || (strtoul(class, NULL, 16) >> 16) != 0x03)
			continue;
		if (read_attr(de->d_name, "current_link_speed", speed, sizeof(speed)) ||
		    read_attr(de->d_name, "current_link_width", width, sizeof(width)))
			continue;
		mbps = dl_pcie_link_mbps(speed, width);
		if (mbps > best)
			best = mbps;
	}
	closedir(d);
	return (uint32_t)best;
}
