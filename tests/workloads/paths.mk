# GNU make fragment, included from tests/tests.mk: the workloads of the paths no
# other test reaches (tests/integration/test_faults.py): a stand-in runtime
# whose calls nest deep and take unmapped pointers, and a process tree held open.
DEEP_DIR := $(OUTPUT)/workloads/deep
DEEP_SRC := tests/workloads/deep
WORKLOADS += $(DEEP_DIR)/libcudart.so.13 $(DEEP_DIR)/deep_calls $(OUTPUT)/workloads/fanout

$(DEEP_DIR):
	mkdir -p $@

# -O1 -fno-optimize-sibling-calls: each nested level stays a call of its own.
$(DEEP_DIR)/libcudart.so.13: $(DEEP_SRC)/deep_cudart.c | $(DEEP_DIR)
	$(CC) $(TEST_CFLAGS) -O1 -fno-optimize-sibling-calls -fPIC -shared -fvisibility=hidden \
		-Wl,-soname,libcudart.so.13 $< -o $@

$(DEEP_DIR)/deep_calls: $(DEEP_SRC)/deep_calls.c $(DEEP_DIR)/libcudart.so.13
	$(CC) $(TEST_CFLAGS) $< -L$(DEEP_DIR) -l:libcudart.so.13 -Wl,-rpath,$(abspath $(DEEP_DIR)) -o $@

$(OUTPUT)/workloads/fanout: tests/workloads/fanout.c tests/workloads/handshake.h | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) -pthread $< -o $@
