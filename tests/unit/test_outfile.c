// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Output files: nothing at the destination changes before the commit, an
 * abort leaves it as it was and no temporary behind, the file is 0600, a link
 * someone else owns is replaced and its target untouched, one's own link is
 * followed, pipes and devices are written in place (a FIFO nobody reads fails
 * at once), two names of one file are told apart from two files, and a
 * temporary a killed run left is removed by the next run to that name while
 * one a live run writes is left alone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "outfile.h"

static char dir[] = "/tmp/dlbpf-test-outfile-XXXXXX";

static const char *at(const char *name)
{
	static char bufs[4][512];
	static int k;
	char *b = bufs[k++ % 4];

	snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
	return b;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "writing %s", path);
}

/* The file's whole text ("" when it cannot be read). */
static const char *text_of(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

/* Entries of the test directory besides the named ones: temporaries left behind. */
static int hidden_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static int write_out(const char *path, const char *text, bool commit)
{
	struct dl_outfile o;
	int err = dl_outfile_open(&o, path);

	if (err)
		return err;
	fputs(text, o.f);
	if (commit)
		return dl_outfile_commit(&o);
	dl_outfile_abort(&o);
	return 0;
}

static void test_new_and_replace(void)
{
	struct dl_outfile o;
	struct stat st, before;

	/* A new file: absent until committed, then 0600 whatever the umask lets through. */
	CHECK(dl_outfile_open(&o, at("new.json")) == 0, "open");
	fputs("new", o.f);
	CHECK(access(at("new.json"), F_OK) != 0, "visible before the commit");
	CHECK(hidden_entries() == 1, "%d temporaries", hidden_entries());
	CHECK(dl_outfile_commit(&o) == 0, "commit");
	CHECK(!strcmp(text_of(at("new.json")), "new"), "content %s", text_of(at("new.json")));
	CHECK(stat(at("new.json"), &st) == 0 && (st.st_mode & 07777) == 0600, "mode %o", st.st_mode & 07777);
	CHECK(hidden_entries() == 0, "temporary left behind");

	/* An existing file: untouched by an aborted run, replaced (a new inode) by a committed one. */
	put(at("old.json"), "old");
	CHECK(chmod(at("old.json"), 0644) == 0 && stat(at("old.json"), &before) == 0, "setup");
	CHECK(write_out(at("old.json"), "half of a", false) == 0, "aborted");
	CHECK(!strcmp(text_of(at("old.json")), "old"), "an aborted run changed it: %s", text_of(at("old.json")));
	CHECK(hidden_entries() == 0, "temporary left behind");
	CHECK(write_out(at("old.json"), "replaced", true) == 0, "committed");
	CHECK(!strcmp(text_of(at("old.json")), "replaced"), "content %s", text_of(at("old.json")));
	CHECK(stat(at("old.json"), &st) == 0 && st.st_ino != before.st_ino && (st.st_mode & 07777) == 0600,
	      "ino %lu -> %lu, mode %o", (unsigned long)before.st_ino, (unsigned long)st.st_ino, st.st_mode & 07777);
}

static void test_links(void)
{
	struct stat st;

	/* One's own link is followed: the target gets the output, the link stays. */
	put(at("target.json"), "target");
	CHECK(symlink("target.json", at("mine.json")) == 0, "symlink");
	CHECK(write_out(at("mine.json"), "through mine", true) == 0, "commit");
	CHECK(!strcmp(text_of(at("target.json")), "through mine"), "target %s", text_of(at("target.json")));
	CHECK(lstat(at("mine.json"), &st) == 0 && S_ISLNK(st.st_mode), "own link replaced");

	/* Someone else's link (needs root to make one): replaced, its target never written. */
	put(at("victim"), "victim");
	CHECK(symlink(at("victim"), at("planted.json")) == 0, "symlink");
	if (geteuid() != 0 || lchown(at("planted.json"), 65534, 65534)) {
		fprintf(stderr, "test_outfile: not root, the planted-link case is not run\n");
		return;
	}
	CHECK(write_out(at("planted.json"), "ours", true) == 0, "commit");
	CHECK(!strcmp(text_of(at("victim")), "victim"), "the link's target was written: %s", text_of(at("victim")));
	CHECK(lstat(at("planted.json"), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
	      (st.st_mode & 07777) == 0600, "the link is not replaced by our file (mode %o)", st.st_mode & 07777);
	CHECK(!strcmp(text_of(at("planted.json")), "ours"), "content %s", text_of(at("planted.json")));
}

static void test_in_place(void)
{
	struct dl_outfile o;
	int err;

	CHECK(dl_outfile_open(&o, "/dev/null") == 0 && o.in_place && !o.tmp, "/dev/null in place");
	fputs("x", o.f);
	CHECK(dl_outfile_commit(&o) == 0, "commit /dev/null");
	/* A FIFO nobody reads: a clear error now, not an open() that waits forever. */
	CHECK(mkfifo(at("fifo"), 0600) == 0, "mkfifo");
	err = dl_outfile_open(&o, at("fifo"));
	CHECK(err == -ENXIO, "FIFO without a reader: %d", err);
	CHECK(dl_outfile_open(&o, dir) == -EISDIR, "a directory");
	CHECK(dl_outfile_open(&o, at("no-such-dir/x")) == -ENOENT, "a missing directory");
	CHECK(hidden_entries() == 0, "temporary left behind");
}

static void test_ids(void)
{
	struct dl_fileref a, b;

	/* Not there yet: the directory and the name decide, however the directory is named. */
	CHECK(dl_output_id(at("x.json"), &a) == 0 && dl_output_id(at("./x.json"), &b) == 0, "ids");
	CHECK(dl_fileref_clash(&a, &b), "dir/x and dir/./x");
	CHECK(dl_output_id(at("y.json"), &b) == 0 && !dl_fileref_clash(&a, &b), "x and y clash");
	/* There: the inode decides (a hard link and a link of ours are the same file). */
	put(at("in.dlbpf"), "rec");
	CHECK(link(at("in.dlbpf"), at("hard.dlbpf")) == 0 && symlink("in.dlbpf", at("soft.dlbpf")) == 0, "links");
	CHECK(dl_input_id(at("in.dlbpf"), &a) == 0, "input id");
	CHECK(dl_output_id(at("hard.dlbpf"), &b) == 0 && dl_fileref_clash(&a, &b), "hard link");
	CHECK(dl_output_id(at("soft.dlbpf"), &b) == 0 && dl_fileref_clash(&a, &b), "own symlink");
	CHECK(dl_output_id(at("target.json"), &b) == 0 && !dl_fileref_clash(&a, &b), "another file");
	/* /dev/null takes any number of outputs. */
	CHECK(dl_output_id("/dev/null", &a) == 0 && dl_output_id("/dev/null", &b) == 0 && !dl_fileref_clash(&a, &b),
	      "/dev/null twice");
}

/* A run that dies (as SIGKILL would end it) with its temporary of path half written. */
static void killed_run(const char *path)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct dl_outfile o;

		if (dl_outfile_open(&o, path))
			_exit(1);
		fputs("half of it", o.f);
		fflush(o.f);
		_exit(0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the killed run");
}

static void test_leftovers(void)
{
	struct dl_outfile live, next;
	struct stat st;

	killed_run(at("left.json"));
	CHECK(hidden_entries() == 1, "%d temporaries after the killed run", hidden_entries());
	/* Not of dlbpf's making: other names, or another mode. */
	put(at(".left.json.abc"), "x");
	put(at(".other.json.abcdef"), "x");
	put(at(".left.json.ABC123"), "x");
	CHECK(chmod(at(".left.json.ABC123"), 0644) == 0, "chmod");
	CHECK(dl_outfile_open(&live, at("left.json")) == 0, "a live run");
	CHECK(hidden_entries() == 4, "%d hidden entries: the leftover is not removed once", hidden_entries());
	killed_run(at("left.json"));
	CHECK(dl_outfile_open(&next, at("left.json")) == 0, "the next run");
	/* The live run's temporary, the next run's, and the three that are not dlbpf's. */
	CHECK(hidden_entries() == 5, "%d hidden entries", hidden_entries());
	CHECK(stat(live.tmp, &st) == 0, "the live run's temporary was removed");
	fputs("live", live.f);
	fputs("next", next.f);
	CHECK(dl_outfile_commit(&live) == 0 && dl_outfile_commit(&next) == 0, "commits");
	CHECK(!strcmp(text_of(at("left.json")), "next"), "content %s", text_of(at("left.json")));
	CHECK(hidden_entries() == 3, "%d hidden entries after the commits", hidden_entries());
	/* A directory's leftovers by the shape of their names (the flight recorder's dumps). */
	killed_run(at("flight-1-usr1.dlbpf"));
	killed_run(at("flight-2-slow-step.dlbpf"));
	put(at(".flight-3.json.abcdef"), "x");
	CHECK(chmod(at(".flight-3.json.abcdef"), 0600) == 0, "chmod");
	CHECK(dl_outfile_open(&live, at("flight-4-usr1.dlbpf")) == 0, "a live dump");
	CHECK(hidden_entries() == 7, "%d hidden entries before", hidden_entries());
	dl_outfile_remove_leftovers(dir, "flight-", ".dlbpf");
	CHECK(hidden_entries() == 5, "%d hidden entries: the two killed dumps' go, the live one and the rest stay",
	      hidden_entries());
	CHECK(stat(live.tmp, &st) == 0, "the live dump's temporary was removed");
	dl_outfile_abort(&live);
	unlink(at(".flight-3.json.abcdef"));
	unlink(at(".left.json.abc"));
	unlink(at(".other.json.abcdef"));
	unlink(at(".left.json.ABC123"));
	unlink(at("left.json"));
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	umask(022);
	test_new_and_replace();
	test_links();
	test_in_place();
	test_ids();
	test_leftovers();
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
		CHECK(system(cmd) == 0, "cleanup");
	}
	return check_report("test_outfile");
}
