/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython frames of a call (DL_CUDA_PY) and the code objects they name
 * (DL_EV_PYCODE): the line of an instruction from the code object's line
 * table, as the interpreter itself computes it (PyCode_Addr2Line). Pure:
 * tables and records come from the traced side or a recording and may be
 * anything; every read is bounded by their length.
 */
#ifndef DLBPF_PYLINE_H
#define DLBPF_PYLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "dlbpf/events.h"

/*
 * The line of the instruction at byte_off of the bytecode, for a table of
 * format (enum dl_pycode_format) and the code object's first line; -1 when
 * the table gives it none (an artificial instruction, an offset past the
 * table, a table cut short or corrupt, an unknown format).
 */
int dl_pyline(unsigned format, const uint8_t *table, size_t len, int32_t firstlineno, uint32_t byte_off);

/* True when a code record holds its two strings and its table (the stream's check). */
bool dl_pycode_ok(const struct dl_pycode_ev *e);
/* Its strings and table (the record checked by dl_pycode_ok). */
const char *dl_pycode_file(const struct dl_pycode_ev *e);
const char *dl_pycode_func(const struct dl_pycode_ev *e);
const uint8_t *dl_pycode_table(const struct dl_pycode_ev *e);

/*
 * A call record's Python frames (DL_CUDA_PY), copied out (the record may sit
 * at any offset): false when the record has none or is too short for them.
 * n is clamped to DL_PY_MAX; *native_words says where --stacks' return
 * addresses start in the tail (in words).
 */
bool dl_py_stack_of(const struct dl_cuda_ev *ev, struct dl_py_stack *out, uint32_t *native_words);

#endif
