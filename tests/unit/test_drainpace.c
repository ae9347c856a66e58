// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * capture/drainpace.c on its own: the drain interval stretches while drains
 * find the buffer nearly empty and snaps back when one finds more, never past
 * its bounds, whatever --drain-ms asks.
 */
#include "check.h"
#include "capture/drainpace.h"

#define MIB (1ull << 20)

int main(void)
{
	struct dl_drain_pace p;
	unsigned t = 0;

	dl_drain_pace_init(&p, 10, 80, 16 * MIB);
	/* Nothing read: 20, 40, 80, then it stays at the cap. */
	CHECK(dl_drain_pace_next(&p, 0) == 20, "first idle drain -> %u", p.cur_ms);
	CHECK(dl_drain_pace_next(&p, 0) == 40, "second idle drain -> %u", p.cur_ms);
	CHECK(dl_drain_pace_next(&p, 0) == 80, "third idle drain -> %u", p.cur_ms);
	CHECK(dl_drain_pace_next(&p, 0) == 80, "the cap is kept -> %u", p.cur_ms);
	/* 1/16 of the buffer in one drain: back to the base at once. */
	CHECK(dl_drain_pace_next(&p, 16 * MIB / 16) == 10, "a fuller drain -> %u", p.cur_ms);
	/* Just under 1/32 still stretches: the threshold is the buffer's, not a count of records. */
	CHECK(dl_drain_pace_next(&p, 16 * MIB / 32 - 1) == 20, "under 1/32 -> %u", p.cur_ms);
	/* From 1/32 to under 1/16: kept. */
	CHECK(dl_drain_pace_next(&p, 16 * MIB / 32) == 20, "1/32 -> %u", p.cur_ms);
	CHECK(dl_drain_pace_next(&p, 16 * MIB / 16 - 1) == 20, "under 1/16 -> %u", p.cur_ms);

	/*
	 * A steady 128 KiB per 10 ms (100 k records/s of 128 B, 16 MiB buffer)
	 * settles at 40 ms, where a drain reads 512 KiB = 1/32, and stays there.
	 */
	dl_drain_pace_init(&p, 10, 80, 16 * MIB);
	for (int i = 0; i < 5; i++)
		t = dl_drain_pace_next(&p, (uint64_t)p.cur_ms * 128 * 1024 / 10);
	CHECK(t == 40, "a steady 12.8 MiB/s settles at %u ms", t);
	for (int i = 0; i < 20; i++)
		CHECK(dl_drain_pace_next(&p, (uint64_t)p.cur_ms * 128 * 1024 / 10) == 40, "then moves to %u ms",
		      p.cur_ms);

	/* --drain-ms above the cap: the asked interval, never shorter, never longer. */
	dl_drain_pace_init(&p, 200, 80, 16 * MIB);
	CHECK(dl_drain_pace_next(&p, 0) == 200 && dl_drain_pace_next(&p, 16 * MIB) == 200, "-> %u", p.cur_ms);
	/* --drain-ms 0 is refused by the parser; a zero base still waits 1 ms, not a busy loop. */
	dl_drain_pace_init(&p, 0, 80, 16 * MIB);
	CHECK(dl_drain_pace_next(&p, 16 * MIB) == 1, "zero base -> %u", p.cur_ms);
	return check_report("drainpace");
}
