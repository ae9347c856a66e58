/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A process's socket receives by endpoint in the text report and the JSON summary (processes[].net). */
#ifndef DLBPF_REPORT_NET_H
#define DLBPF_REPORT_NET_H

#include <stdio.h>
#include "analysis/net.h"
#include "output/json.h"

/* The few endpoints the process waited on most, a line each; nothing when it received nothing. */
void dl_report_net_text(FILE *f, const struct dl_proc_net *pn);
/* "net": [...] and "net_more" of one process object. */
void dl_report_net_json(struct dl_json *j, const struct dl_proc_net *pn);

#endif
