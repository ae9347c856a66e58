/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The HTML report (--html FILE): one self-contained page, readable offline.
 * Inline CSS and SVG only, no script, and a Content-Security-Policy that lets
 * the page load nothing; every name of the traced side is escaped for HTML.
 */
#ifndef DLBPF_HTML_H
#define DLBPF_HTML_H

#include <stdio.h>
#include "output/model.h"

/* The whole page. Returns 0, or -1 when writing failed (errno set). */
int dl_report_html(FILE *f, const struct dl_report_model *m);

#endif
