/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Native Perfetto trace writer (timeline_writer.h): one packet sequence, names,
 * categories and annotation names interned, timestamps as deltas on an
 * incremental sequence clock (mapped to CLOCK_MONOTONIC, BOOTTIME and
 * REALTIME by a clock snapshot). Events wait in a bounded heap (PF_WINDOW_NS,
 * PF_HEAP_CAP) so they leave in time order; one that arrives later than that
 * carries an absolute CLOCK_MONOTONIC timestamp instead.
 * Field numbers: the public Perfetto trace.proto (protos/perfetto/trace/trace.proto and the files it imports).
 */
#ifndef DLBPF_PERFETTO_H
#define DLBPF_PERFETTO_H

#include "output/pbwriter.h"

#define PF_WINDOW_NS 1000000000ull
#define PF_HEAP_CAP 16384
#define PF_SEQ_ID 1
#define PF_CLOCK_INCR 64          /* sequence-scoped clock ids are 64..127 */

enum pf_builtin_clock { PF_CLOCK_REALTIME = 1, PF_CLOCK_MONOTONIC = 3, PF_CLOCK_BOOTTIME = 6 };

/* TracePacket */
enum { PF_PKT_TIMESTAMP = 8, PF_PKT_CLOCK_SNAPSHOT = 6, PF_PKT_SEQ_ID = 10, PF_PKT_TRACK_EVENT = 11,
       PF_PKT_INTERNED = 12, PF_PKT_SEQ_FLAGS = 13, PF_PKT_CLOCK_ID = 58, PF_PKT_DEFAULTS = 59,
       PF_PKT_TRACK_DESC = 60 };
enum { PF_SEQ_CLEARED = 1, PF_SEQ_NEEDS_STATE = 2 };
/* TrackEvent */
enum { PF_TE_CATEGORY_IIDS = 3, PF_TE_DEBUG = 4, PF_TE_TYPE = 9, PF_TE_NAME_IID = 10, PF_TE_TRACK = 11,
       PF_TE_NAME = 23, PF_TE_DOUBLE_COUNTER = 44, PF_TE_FLOW = 47, PF_TE_FLOW_END = 48 };
enum { PF_TYPE_BEGIN = 1, PF_TYPE_END = 2, PF_TYPE_INSTANT = 3, PF_TYPE_COUNTER = 4 };
/*
 * InternedData: event_categories, event_names, debug_annotation_names ({iid 1, name 2}),
 * debug_annotation_string_values ({iid 1, str 2}, used by DebugAnnotation.string_value_iid 17).
 */
enum { PF_INTERN_CAT = 1, PF_INTERN_NAME = 2, PF_INTERN_ANNOT = 3, PF_INTERN_STRVAL = 29, PF_NINTERN = 4 };
#define PF_DA_STRING_IID 17

/* Encodes packets into pb (exposed for unit tests). */
void pf_encode_preamble(struct dl_pb *pb);   /* clears the sequence's state, sets the default clock */
void pf_encode_clock_snapshot(struct dl_pb *pb, uint64_t mono, uint64_t boot, uint64_t real);
void pf_encode_interned(struct dl_pb *pb, int kind, uint64_t iid, const char *name);
/* One TracePacket holding the TrackEvent body (already encoded); ts absolute or a delta. */
void pf_encode_event_packet(struct dl_pb *pb, uint64_t ts, int absolute, const uint8_t *body, size_t len);

#endif
