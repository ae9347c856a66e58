# libFuzzer harnesses (included by tests/tests.mk). Every tests/fuzz/fuzz_*.c is built with
# clang against fuzz builds of the pure stage libraries (the unit tests' set: no libbpf) and run
# by `make fuzz` for FUZZ_SECONDS each, and by test-all for FUZZ_TEST_SECONDS each. Inputs that
# grow coverage are kept in $(FUZZ_DIR)/corpus/NAME, crashes in $(FUZZ_DIR)/artifacts/NAME.
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_OBJ := $(OUTPUT)/obj-fuzz
FUZZ_DIR := $(OUTPUT)/fuzz
FUZZ_SEEDS := $(FUZZ_DIR)/seeds
fuzz_lib = $(OUTPUT)/lib-fuzz/libdl_$(1).a
FUZZ_LIBS := $(foreach s,output analysis capture-pure records base,$(call fuzz_lib,$(s)))
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(FUZZ_DIR)/%,$(FUZZ_SRCS))
FUZZ_SECONDS ?= 60
FUZZ_TEST_SECONDS ?= 25
# One command per harness for tests/run-tests.sh: each prints its own "N passed, N failed".
FUZZ_TESTS := $(foreach b,$(FUZZ_BINS),"tests/fuzz/run-fuzz.sh $(FUZZ_TEST_SECONDS) $(b)")

define fuzz_lib_rule
$(call fuzz_lib,$(1)): $(patsubst user/%.c,$(FUZZ_OBJ)/%.o,$(2))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach s,output analysis records,$(eval $(call fuzz_lib_rule,$(s),$(call stage_srcs,$(s)))))
$(eval $(call fuzz_lib_rule,base,$(BASE_SRCS)))
$(eval $(call fuzz_lib_rule,capture-pure,$(SAN_CAPTURE_SRCS)))

$(FUZZ_OBJ)/%.o: user/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CFLAGS_COMMON) -O1 -fsanitize=fuzzer-no-link $(FUZZ_SAN) -MMD -MP -c $< -o $@

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIBS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CFLAGS_COMMON) -Itests/fuzz -O1 -fsanitize=fuzzer $(FUZZ_SAN) -MMD -MP $< $(FUZZ_LIBS) \
		-lelf -lz -lm -o $@
-include $(shell find $(FUZZ_OBJ) $(FUZZ_DIR) -name '*.d' 2>/dev/null)

# Starting inputs: recordings (and their records) written from the ABI's structs, a small ELF,
# and, as root, a real recording of a short simulated training run.
$(FUZZ_DIR)/seedgen: tests/fuzz/seedgen.c $(call san_lib,records) $(call san_lib,base)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -O1 $(SAN_FLAGS) $< $(call san_lib,records) $(call san_lib,base) -o $@

$(FUZZ_SEEDS)/.made: $(FUZZ_DIR)/seedgen tests/fuzz/seed_elf.c tests/fuzz/fuzz.mk
	rm -rf $(FUZZ_SEEDS) && mkdir -p $(FUZZ_SEEDS)/replay $(FUZZ_SEEDS)/decode $(FUZZ_SEEDS)/elfsym
	$(FUZZ_DIR)/seedgen $(FUZZ_SEEDS)
	$(CC) -shared -fPIC -Os -Wl,-z,noseparate-code -o $(FUZZ_SEEDS)/elfsym/small.so tests/fuzz/seed_elf.c
	strip -o $(FUZZ_SEEDS)/elfsym/small-stripped.so $(FUZZ_SEEDS)/elfsym/small.so
	mkdir -p $(FUZZ_SEEDS)/http
	printf 'GET /metrics HTTP/1.1\r\nHost: node:9464\r\nAccept: text/plain\r\n\r\n' > $(FUZZ_SEEDS)/http/get
	printf 'GET /metrics?x=1 HTTP/1.0\n\n' > $(FUZZ_SEEDS)/http/get-query
	printf 'POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n' > $(FUZZ_SEEDS)/http/post
	touch $@

FUZZ_SEED_DEPS := $(FUZZ_SEEDS)/.made
ifeq ($(shell id -u),0)
FUZZ_SEED_DEPS += $(FUZZ_SEEDS)/replay/train.dlbpf
# Best effort: without BPF (a container, an old kernel) the synthetic seeds remain.
$(FUZZ_SEEDS)/replay/train.dlbpf: $(FUZZ_SEEDS)/.made | dlbpf $(GPUSIM_LIB) $(TRAIN)
	-LD_LIBRARY_PATH=$(OUTPUT)/gpusim timeout 60 ./dlbpf record -q -o $@ -- $(TRAIN) --scenario input \
		--steps 3 --kernels 2 --workers 1 --quiet >/dev/null
endif

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS) $(FUZZ_SEED_DEPS)

fuzz: fuzz-build
	@tests/fuzz/run-fuzz.sh $(FUZZ_SECONDS) $(FUZZ_BINS)
