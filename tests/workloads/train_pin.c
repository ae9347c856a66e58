// SPDX-License-Identifier: MIT
/*
 * train_pin.c — a pin-memory thread (--pin-thread), as PyTorch's DataLoader
 * runs with pin_memory=True: a thread of the main process takes each batch
 * the workers post, copies it into a staging buffer of its own (the "pinned"
 * copy) and hands it on to the main thread. The main thread's waits then end
 * on this thread, and its waits on the workers: a chain of two hand-offs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train.h"

static pthread_t pin;
static sem_t ready[MAX_SLOTS];
static uint64_t waited[MAX_SLOTS];
static char *stage;
static int pin_on;
static volatile int pin_stop;
pid_t pin_tid;

static void *pin_main(void *arg)
{
	(void)arg;
	pin_tid = gettid();
	for (int b = 0; b < O.steps && !pin_stop; b++) {
		int s = b % ring->nslots;
		uint64_t t0 = now_ns();

		if (sem_wait_intr(&ring->filled[s], 0) || pin_stop)
			break;
		waited[s] = now_ns() - t0;
		memcpy(stage + (size_t)s * ring->slot_bytes, slots + (size_t)s * ring->slot_bytes, ring->slot_bytes);
		sem_post(&ready[s]);
	}
	return NULL;
}

int pin_start(void)
{
	if (!O.pin_thread)
		return 0;
	stage = malloc((size_t)ring->nslots * ring->slot_bytes);
	if (!stage) {
		fprintf(stderr, "train: no memory for the pin thread's staging buffers\n");
		return -1;
	}
	for (int s = 0; s < ring->nslots; s++)
		sem_init(&ready[s], 0, 0);
	if (pthread_create(&pin, NULL, pin_main, NULL)) {
		fprintf(stderr, "train: cannot start the pin thread\n");
		return -1;
	}
	pin_on = 1;
	return 0;
}

int batch_take(int s)
{
	return sem_wait_intr(pin_on ? &ready[s] : &ring->filled[s], 1);
}

uint64_t pin_waited(int s)
{
	/* Written before the sem_post that let the main thread take the slot. */
	return pin_on ? waited[s] : 0;
}

void pin_join(void)
{
	if (!pin_on)
		return;
	pin_stop = 1;
	/* It may wait on a batch no worker will post now: stop_children posted every slot first. */
	for (int s = 0; s < ring->nslots; s++)
		sem_post(&ring->filled[s]);
	pthread_join(pin, NULL);
	free(stage);
	pin_on = 0;
}
