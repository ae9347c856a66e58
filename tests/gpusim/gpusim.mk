# GNU make fragment: the GPU simulator (tests/gpusim) and its tests.
# Included by the top-level Makefile, which defines OUTPUT, CUDA_HOME, CC and
# TEST_CFLAGS before the include.
CUDA_HOME ?= /usr/local/cuda

# The library, one job a file (gpusim_int.h says which); the tests are not in it.
GPUSIM_SRC      := $(addprefix tests/gpusim/,gpusim_model.c gpusim_streams.c gpusim_memory.c \
	gpusim_copy.c gpusim_kernels.c gpusim_api.c gpusim_errors.c gpusim_device.c gpusim_comm.c gpusim_graph.c)
GPUSIM_HDR      := tests/gpusim/gpusim_int.h tests/common/thread_clock.h
GPUSIM_MAP      := tests/gpusim/libcudart.map
GPUSIM_LIB      := $(OUTPUT)/gpusim/libcudart.so.13
# Its NCCL: libnccl.so.2 beside it, calling into it for the device time of collectives.
GPUSIM_NCCL     := $(OUTPUT)/gpusim/libnccl.so.2
# Its driver, in a folder of its own: a program that loads libcuda.so.1 (the real NCCL, a framework)
# finds it only where a test asks for it (LD_LIBRARY_PATH=.output/gpusim:.output/gpusim/driver).
GPUSIM_DRIVER   := $(OUTPUT)/gpusim/driver/libcuda.so.1
GPUSIM_TEST     := $(OUTPUT)/tests/test_gpusim
GPUSIM_ASAN_LIB := $(OUTPUT)/gpusim-asan/libcudart.so.13
GPUSIM_ASAN_TEST := $(OUTPUT)/tests/test_gpusim-asan
GPUSIM_TEST_SRC := tests/gpusim/test_gpusim.c tests/gpusim/test_gpusim_timing.c tests/gpusim/test_gpusim_shapes.c
GPUSIM_TEST_DEPS := $(GPUSIM_TEST_SRC) tests/gpusim/test_gpusim.h tests/common/thread_clock.h tests/gpusim/gpusim.mk
GPUSIM_SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# Frame pointers make every function start with push %rbp, which uprobes emulate
# instead of single-stepping (~0.4 us against ~14 us a hit, measured on kernel 6.18).
GPUSIM_LIB_FLAGS = -fPIC -fno-omit-frame-pointer -fvisibility=hidden -Itests/common -I$(CUDA_HOME)/include -pthread -shared \
	-Wl,-soname,libcudart.so.13 -Wl,--version-script=$(GPUSIM_MAP) -Wl,-z,defs
# The test links against the toolkit's real library (no rpath): it runs on the
# simulator only through LD_LIBRARY_PATH, which is the point.
GPUSIM_TEST_FLAGS = -Itests/common -I$(CUDA_HOME)/include -pthread -L$(CUDA_HOME)/lib64 -l:libcudart.so.13

$(GPUSIM_LIB): $(GPUSIM_SRC) $(GPUSIM_HDR) $(GPUSIM_MAP) tests/gpusim/gpusim.mk
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(GPUSIM_LIB_FLAGS) -o $@ $(GPUSIM_SRC)

$(GPUSIM_NCCL): tests/gpusim/gpusim_nccl.c $(GPUSIM_LIB) tests/gpusim/gpusim.mk
	$(CC) $(TEST_CFLAGS) -fPIC -fno-omit-frame-pointer -fvisibility=hidden -I$(CUDA_HOME)/include -shared \
		-Wl,-soname,libnccl.so.2 -Wl,-z,defs -o $@ $< -L$(@D) -l:libcudart.so.13

# Its driver: libcuda.so.1 beside it (contexts and peer copies), calling into it for the current device.
$(GPUSIM_DRIVER): tests/gpusim/gpusim_driver.c $(GPUSIM_LIB) tests/gpusim/gpusim.mk
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -fPIC -fno-omit-frame-pointer -fvisibility=hidden -I$(CUDA_HOME)/include -shared \
		-Wl,-soname,libcuda.so.1 -Wl,-z,defs -o $@ $< -L$(dir $(GPUSIM_LIB)) -l:libcudart.so.13

$(GPUSIM_TEST): $(GPUSIM_TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -o $@ $(GPUSIM_TEST_SRC) $(GPUSIM_TEST_FLAGS)

$(GPUSIM_ASAN_LIB): $(GPUSIM_SRC) $(GPUSIM_HDR) $(GPUSIM_MAP) tests/gpusim/gpusim.mk
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(GPUSIM_SAN) $(GPUSIM_LIB_FLAGS) -o $@ $(GPUSIM_SRC)

$(GPUSIM_ASAN_TEST): $(GPUSIM_TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(GPUSIM_SAN) -o $@ $(GPUSIM_TEST_SRC) $(GPUSIM_TEST_FLAGS)

.PHONY: gpusim test-gpusim test-gpusim-asan
gpusim: $(GPUSIM_LIB) $(GPUSIM_NCCL) $(GPUSIM_DRIVER)

test-gpusim: $(GPUSIM_LIB) $(GPUSIM_NCCL) $(GPUSIM_DRIVER) $(GPUSIM_TEST)
	LD_LIBRARY_PATH=$(OUTPUT)/gpusim $(GPUSIM_TEST)

test-gpusim-asan: $(GPUSIM_ASAN_LIB) $(GPUSIM_ASAN_TEST)
	ASAN_OPTIONS=detect_leaks=1 LD_LIBRARY_PATH=$(OUTPUT)/gpusim-asan $(GPUSIM_ASAN_TEST)
