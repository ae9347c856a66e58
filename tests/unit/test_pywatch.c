// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --step-on NAME held against a code object's file and qualified name
 * (capture/pyobj.c, for capture/pywatch.c): each form the manual gives, and the near misses
 * that must not match (another file that ends the same, a name that only
 * contains the wanted one).
 */
#include <stdbool.h>
#include <string.h>
#include "check.h"
#include "capture/pyobj.h"

struct want_case {
	const char *want, *file, *qual;
	bool has_qualname, match, exact;
};

static const struct want_case cases[] = {
	{ "train_step", "/work/train.py", "train_step", true, true, true },
	{ "train_step", "/work/train.py", "main.<locals>.train_step", true, true, false },
	{ "train_step", "/work/train.py", "my_train_step", true, false, false },
	{ "train_step", "/work/train.py", "train_step.inner", true, false, false },
	{ "step", "/usr/lib/torch/optim/sgd.py", "SGD.step", true, true, false },
	{ "Trainer.step", "/work/train.py", "Trainer.step", true, true, true },
	{ "Trainer.step", "/work/train.py", "SGD.step", true, false, false },
	{ "Trainer.step", "/work/train.py", "Outer.Trainer.step", true, true, false },
	{ "train.py:train_step", "/work/train.py", "train_step", true, true, true },
	{ "train.py:train_step", "train.py", "train_step", true, true, true },
	{ "train.py:train_step", "/work/mytrain.py", "train_step", true, false, false },
	{ "train.py:train_step", "/work/train.py", "eval_step", true, false, false },
	{ "work/train.py:train_step", "/srv/work/train.py", "train_step", true, true, true },
	{ "train.py:", "/work/train.py", "train_step", true, false, false },
	/* 3.10: only the name, held against the wanted name's last component */
	{ "Trainer.step", "/work/train.py", "step", false, true, false },
	{ "train_step", "/work/train.py", "train_step", false, true, false },
	{ "train_step", "/work/train.py", "other", false, false, false },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct want_case *c = &cases[i];
		bool exact = !c->exact;
		bool got = dl_pycode_name_matches(c->want, c->file, c->qual, c->has_qualname, &exact);

		CHECK(got == c->match, "%s against %s:%s: %d", c->want, c->file, c->qual, got);
		if (got)
			CHECK(exact == c->exact, "%s against %s:%s: exact %d", c->want, c->file, c->qual, exact);
	}
	return check_report("pywatch");
}
