// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A CPython interpreter as pyenv and --enable-shared builds make it: an
 * executable with no interpreter of its own (no _PyRuntime, no PyCode_Type),
 * linked with the distribution's libpython3.X.so, where the interpreter is.
 * Its main is CPython's own (Programs/python.c), so it runs any script as
 * the distribution's python3 does. Built as .../pyshared/python3: the name
 * a tracer looks for.
 */
extern int Py_BytesMain(int argc, char **argv);

int main(int argc, char **argv)
{
	return Py_BytesMain(argc, argv);
}
