# GNU make fragment: the training-loop emulator (tests/workloads/train).
# Included by the top-level Makefile, which defines OUTPUT, CUDA_HOME, CC and
# TEST_CFLAGS before the include.
#
# train is linked against the toolkit's real libcudart.so.13 without an rpath:
#   LD_LIBRARY_PATH=$(OUTPUT)/gpusim        runs it on the GPU simulator
#   LD_LIBRARY_PATH=$(CUDA_HOME)/lib64      runs it on the real runtime
CUDA_HOME ?= /usr/local/cuda

TRAIN_BIN := $(OUTPUT)/workloads/train
TRAIN_SCENARIOS := gpu input disk pageable small-copies sync-copies launch host-cpu contention two-streams comm graph two-gpus two-gpus-peer balanced

# main and the step loop, options, loader and ring, ground truth, the device's
# own timeline, the gradient all-reduce (train.h is what they share)
TRAIN_SRCS := $(addprefix tests/workloads/,train.c train_opts.c train_loader.c train_truth.c train_device.c \
	train_comm.c train_pin.c)

$(TRAIN_BIN): $(TRAIN_SRCS) tests/workloads/train.h tests/common/thread_clock.h tests/workloads/train.mk \
		| $(if $(CROSS),$(GPUSIM_LIB))
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Itests/common -I$(CUDA_HOME)/include -o $@ $(TRAIN_SRCS) \
		-L$(CUDART_DIR) -l:libcudart.so.13 -pthread -ldl

.PHONY: train test-train test-train-real
train: $(TRAIN_BIN)

# Every scenario on the simulator; --check fails a run whose named phase is
# under 50% of step time in its own ground truth (balanced has none).
test-train: $(TRAIN_BIN) $(OUTPUT)/gpusim/libcudart.so.13 $(OUTPUT)/gpusim/libnccl.so.2
	@mkdir -p $(OUTPUT)/truth
	@set -e; for s in $(TRAIN_SCENARIOS); do \
		LD_LIBRARY_PATH=$(OUTPUT)/gpusim $(TRAIN_BIN) --scenario $$s --check \
			--truth $(OUTPUT)/truth/$$s.jsonl; \
	done

# The real runtime without a GPU: fails fast naming the call, or keeps going
# with --ignore-errors.
test-train-real: $(TRAIN_BIN)
	@if LD_LIBRARY_PATH=$(CUDA_HOME)/lib64 $(TRAIN_BIN) --steps 3 --quiet 2>$(OUTPUT)/train-real.err; then \
		echo "train on the real runtime should fail without a GPU"; exit 1; fi
	@grep -q "cudaSetDevice failed\|cudaMalloc failed" $(OUTPUT)/train-real.err || \
		{ cat $(OUTPUT)/train-real.err; exit 1; }
	LD_LIBRARY_PATH=$(CUDA_HOME)/lib64 $(TRAIN_BIN) --steps 5 --ignore-errors
