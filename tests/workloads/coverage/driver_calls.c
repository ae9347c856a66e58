// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The driver API through the toolkit's stub libcuda (every call returns an
 * error at once; the probes still fire with the real arguments). Prints its
 * own counts and bytes as one JSON line (the ground truth).
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

static char host[1 << 20];

int main(void)
{
	CUdeviceptr dptr = 0x700000000ull;
	CUstream stream = (CUstream)0x5151;
	CUfunction f = (CUfunction)0xf00d;
	CUgraphExec gexec = (CUgraphExec)0x9999;
	void *params[] = { &dptr };
	int h2d = 0, d2h = 0, d2d = 0, launches = 0;
	long h2d_bytes = 0, d2h_bytes = 0, d2d_bytes = 0;
	void *pinned = NULL;

	cuInit(0);
	cuMemAlloc(&dptr, 1 << 20);
	for (int i = 0; i < 3; i++, h2d++)
		h2d_bytes += 4096 << i, cuMemcpyHtoD(dptr, host, 4096u << i);
	for (int i = 0; i < 2; i++, d2h++)
		d2h_bytes += 1000 + i, cuMemcpyDtoH(host, dptr, 1000 + i);
	d2d_bytes += 65536, d2d++, cuMemcpyDtoD(dptr + 65536, dptr, 65536);
	for (int i = 0; i < 2; i++, h2d++)
		h2d_bytes += 300, cuMemcpyHtoDAsync(dptr, host, 300, stream);
	d2h_bytes += 77, d2h++, cuMemcpyDtoHAsync(host, dptr, 77, stream);
	d2d_bytes += 512, d2d++, cuMemcpyDtoDAsync(dptr, dptr + 512, 512, stream);
	cuMemcpyAsync(dptr, dptr + 4096, 123, stream); /* direction left to unified addressing */
	for (int i = 0; i < 4; i++, launches++)
		cuLaunchKernel(f, 2, 3, 4, 32, 2, 1, 128, stream, params, NULL);
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = 9, cfg.gridDimY = 8, cfg.gridDimZ = 7;
	cfg.blockDimX = 64, cfg.blockDimY = 4, cfg.blockDimZ = 2;
	cfg.sharedMemBytes = 1024;
	cfg.hStream = stream;
	cuLaunchKernelEx(&cfg, f, params, NULL);
	for (int i = 0; i < 2; i++)
		cuStreamSynchronize(stream);
	cuCtxSynchronize();
	cuEventSynchronize((CUevent)0x4444);
	cuMemHostAlloc(&pinned, 8192, 0);
	cuMemAllocHost(&pinned, 4096);
	cuMemHostRegister(host, sizeof(host), 0);
	for (int i = 0; i < 2; i++)
		cuGraphLaunch(gexec, stream);
	cuMemFree(dptr);
	printf("{\"h2d\": {\"count\": %d, \"bytes\": %ld}, \"d2h\": {\"count\": %d, \"bytes\": %ld}, "
	       "\"d2d\": {\"count\": %d, \"bytes\": %ld}, \"calls\": {\"cuMemcpyHtoD_v2\": 3, \"cuMemcpyDtoH_v2\": 2, "
	       "\"cuMemcpyDtoD_v2\": 1, \"cuMemcpyHtoDAsync_v2\": 2, \"cuMemcpyDtoHAsync_v2\": 1, "
	       "\"cuMemcpyDtoDAsync_v2\": 1, \"cuMemcpyAsync\": 1, \"cuLaunchKernel\": %d, \"cuLaunchKernelEx\": 1, "
	       "\"cuStreamSynchronize\": 2, \"cuCtxSynchronize\": 1, \"cuEventSynchronize\": 1, \"cuMemAlloc_v2\": 1, "
	       "\"cuMemFree_v2\": 1, \"cuMemHostAlloc\": 1, \"cuMemAllocHost_v2\": 1, \"cuMemHostRegister_v2\": 1, "
	       "\"cuGraphLaunch\": 2}}\n",
	       h2d, h2d_bytes, d2h, d2h_bytes, d2d, d2d_bytes, launches);
	return 0;
}
