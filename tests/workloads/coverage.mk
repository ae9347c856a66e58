# GNU make fragment: workloads of the coverage tests, included from
# tests/tests.mk. nvcc-built binaries (static and shared cudart), the driver
# API through the toolkit's stub libcuda, a runtime stand-in that forwards to
# the driver, and a late dlopen of the runtime.
NVCC ?= $(CUDA_HOME)/bin/nvcc
COV_DIR := $(OUTPUT)/workloads/coverage
CUDA_STUBS := $(CUDA_HOME)/lib64/stubs
COV_SRC := tests/workloads/coverage
COVERAGE_BINS := $(COV_DIR)/kernels_static $(COV_DIR)/kernels_shared $(COV_DIR)/kernels_ptsz $(COV_DIR)/driver_calls \
	$(COV_DIR)/nest/libcudart.so.13 $(COV_DIR)/nest_calls $(COV_DIR)/lateload $(COV_DIR)/sites_static

$(COV_DIR) $(COV_DIR)/nest:
	mkdir -p $@

# nvcc links the runtime statically by default: its functions become local symbols of the executable.
$(COV_DIR)/kernels_static: $(COV_SRC)/kernels.cu | $(COV_DIR)
	$(NVCC) -o $@ $<

# Host functions with known calls (the call-site test).
$(COV_DIR)/sites_static: $(COV_SRC)/sites.cu | $(COV_DIR)
	$(NVCC) -Xcompiler -fno-omit-frame-pointer -o $@ $<

$(COV_DIR)/kernels_shared: $(COV_SRC)/kernels.cu | $(COV_DIR)
	$(NVCC) -cudart=shared -Xlinker -rpath,$(CUDA_HOME)/lib64 -o $@ $<

# Per-thread default stream: the stubs call __cudaLaunchKernel_ptsz, the explicit calls the _ptsz names.
$(COV_DIR)/kernels_ptsz: $(COV_SRC)/kernels.cu | $(COV_DIR)
	$(NVCC) --default-stream per-thread -o $@ $<

$(COV_DIR)/driver_calls: $(COV_SRC)/driver_calls.c $(COV_DIR)/nest/libcuda.so.1 | $(COV_DIR)
	$(CC) $(TEST_CFLAGS) -I$(CUDA_HOME)/include $< -L$(CUDA_STUBS) -lcuda \
		-Wl,-rpath,$(abspath $(COV_DIR)/nest) -o $@

# The stub's SONAME is libcuda.so.1, which the stubs directory lacks: give the loader one.
$(COV_DIR)/nest/libcuda.so.1: | $(COV_DIR)/nest
	ln -sf $(CUDA_STUBS)/libcuda.so $@

$(COV_DIR)/nest/libcudart.so.13: $(COV_SRC)/fake_cudart.c $(COV_DIR)/nest/libcuda.so.1 | $(COV_DIR)/nest
	$(CC) $(TEST_CFLAGS) -O1 -fno-optimize-sibling-calls -fPIC -shared -fvisibility=hidden \
		-I$(CUDA_HOME)/include -Wl,-soname,libcudart.so.13 $< -L$(CUDA_STUBS) -lcuda -o $@

$(COV_DIR)/nest_calls: $(COV_SRC)/nest_calls.c $(COV_DIR)/nest/libcudart.so.13
	$(CC) $(TEST_CFLAGS) -I$(CUDA_HOME)/include $< -L$(COV_DIR)/nest -l:libcudart.so.13 -L$(CUDA_STUBS) -lcuda \
		-Wl,-rpath,$(abspath $(COV_DIR)/nest) -o $@

$(COV_DIR)/lateload: $(COV_SRC)/lateload.c | $(COV_DIR)
	$(CC) $(TEST_CFLAGS) $< -o $@

COVERAGE_TESTS := python3 tests/integration/test_coverage.py
