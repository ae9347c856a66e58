/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A process's reads by file in the text report and the JSON summary (processes[].files). */
#ifndef DLBPF_REPORT_FILES_H
#define DLBPF_REPORT_FILES_H

#include <stdio.h>
#include "analysis/files.h"
#include "output/json.h"
#include "strsafe.h"

/* The few files with the most bytes, a line each; nothing when the process read no file. */
void dl_report_files_text(FILE *f, const struct dl_proc_files *pf, struct dl_sbuf *esc);
/* "files": [...] and "files_more", "files_unknown_fd", "read_errors" of one process object. */
void dl_report_files_json(struct dl_json *j, const struct dl_proc_files *pf);

#endif
