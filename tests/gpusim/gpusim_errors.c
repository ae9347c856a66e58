// SPDX-License-Identifier: MIT
/*
 * gpusim errors: the per-thread last error (sticky until read, as in the real
 * runtime) and the names and strings programs print for a code.
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

_Thread_local cudaError_t t_last_error;

GPUSIM_API cudaError_t cudaGetLastError(void)
{
	cudaError_t e = t_last_error;

	t_last_error = cudaSuccess;
	return e;
}

GPUSIM_API cudaError_t cudaPeekAtLastError(void)
{
	return t_last_error;
}

static const struct {
	cudaError_t code;
	const char *name, *msg;
} errtab[] = {
#define E(c, m) { c, #c, m }
	E(cudaSuccess, "no error"),
	E(cudaErrorInvalidValue, "invalid argument"),
	E(cudaErrorMemoryAllocation, "out of memory"),
	E(cudaErrorInitializationError, "initialization error"),
	E(cudaErrorMissingConfiguration, "__global__ function call is not configured"),
	E(cudaErrorInvalidPitchValue, "invalid pitch argument"),
	E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
	E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
	E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
	E(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
	E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
	E(cudaErrorInvalidDevice, "invalid device ordinal"),
	E(cudaErrorInvalidDeviceFunction, "invalid device function"),
	E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
	E(cudaErrorNotReady, "device not ready"),
	E(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped"),
	E(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region"),
	E(cudaErrorNotSupported, "operation not supported"),
	E(cudaErrorUnknown, "unknown error"),
#undef E
};

static const char *err_text(cudaError_t code, int want_name)
{
	for (size_t i = 0; i < sizeof(errtab) / sizeof(errtab[0]); i++)
		if (errtab[i].code == code)
			return want_name ? errtab[i].name : errtab[i].msg;
	return NULL;
}

GPUSIM_API const char *cudaGetErrorName(cudaError_t error)
{
	const char *s = err_text(error, 1);

	return s ? s : "cudaErrorUnknown";
}

GPUSIM_API const char *cudaGetErrorString(cudaError_t error)
{
	const char *s = err_text(error, 0);

	return s ? s : "unrecognized error code";
}
