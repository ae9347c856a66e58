/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Output files (the JSON summary, the timeline, the recording). A trace names
 * every process, file and kernel of the job, and dlbpf runs as root, so:
 *
 *  - a file is written to a temporary beside its destination (O_EXCL,
 *    O_NOFOLLOW, mode 0600) and renamed over it once complete and on disk; a
 *    run that fails or is stopped leaves an existing destination as it was;
 *  - a symbolic link at the destination is followed only when root or the
 *    user dlbpf runs as owns it (the system's /dev/stdout, one's own links);
 *    one planted by anyone else is replaced, never written through;
 *  - the temporary is locked (flock) while its run lives; a later run to the
 *    same destination removes the temporaries a killed run left (unlocked),
 *    and says so;
 *  - under sudo, a file dlbpf creates is given to the user who ran sudo
 *    (SUDO_UID, SUDO_GID), so that their own `dlbpf report` reads it;
 *  - a pipe or a character device (/dev/null, a terminal, `>(...)`) is
 *    written in place: nothing can be renamed over it; so is the file that is
 *    already dlbpf's stdout or stderr (`-j /dev/stdout > f`), through that
 *    descriptor, after what dlbpf printed there.
 */
#ifndef DLBPF_OUTFILE_H
#define DLBPF_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct dl_outfile {
	FILE *f;
	char *dest;           /* what the rename replaces (the followed link's target, or the path) */
	char *tmp;            /* the temporary, until renamed; NULL when written in place */
	bool in_place;
	bool replaces_link;   /* dest is a link owned by someone else: the link is replaced */
};

/* Where an output lands (or which file an input is), to tell two names of one file apart. */
struct dl_fileref {
	bool exists;          /* dev/ino are the file's; else the directory's, and name the entry */
	bool chardev;         /* a character device: /dev/null may take several outputs */
	dev_t dev;
	ino_t ino;
	char name[256];
};

/* Creates the temporary (or opens a pipe or device in place); 0 or -errno. */
int dl_outfile_open(struct dl_outfile *o, const char *path);
/*
 * Flushes and puts the file at its destination now, while writing goes on:
 * the recording is published so that a killed run leaves what it flushed.
 * 0 or -errno (the file stays a temporary then).
 */
int dl_outfile_publish(struct dl_outfile *o);
/* Flushes, syncs, closes and renames over the destination; on failure removes the temporary. 0 or -errno. */
int dl_outfile_commit(struct dl_outfile *o);
/* Closes; a temporary not yet renamed is removed, the destination left as it was. */
void dl_outfile_abort(struct dl_outfile *o);

/* Under sudo (root with SUDO_UID and SUDO_GID of another user): that user, whom the outputs go to. */
bool dl_sudo_owner(uid_t *uid, gid_t *gid);
/* Gives the new file or directory fd to the user who ran sudo, if any (best effort). */
void dl_give_to_sudo_user(int fd);

/*
 * Removes, and says, the temporaries that runs killed before their end left
 * in dir of files named head*tail (dl_outfile_open does this for its own
 * destination): the flight recorder's dumps, whose names differ each time.
 */
void dl_outfile_remove_leftovers(const char *dir, const char *head, const char *tail);

/* The file an output path would write, as dl_outfile_open resolves it; 0 or -errno. */
int dl_output_id(const char *path, struct dl_fileref *id);
/* The file an input path names; 0 or -errno. */
int dl_input_id(const char *path, struct dl_fileref *id);
/* Whether two ids are one file that cannot take both (the same character device can). */
bool dl_fileref_clash(const struct dl_fileref *a, const struct dl_fileref *b);

#endif
