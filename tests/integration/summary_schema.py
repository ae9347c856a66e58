# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The JSON summary's contract: include/dlbpf/summary.schema.json, checked with jsonschema
(Debian's python3-jsonschema, tools/setup-deps.sh)."""
import json
import os

try:
    import jsonschema
except ImportError:
    # A python3 of its own (pyenv, a venv) does not see Debian's package: look where apt put it.
    import sys
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import jsonschema
    except ImportError:   # reported by violations(), so that a test fails with the reason, not at import
        jsonschema = None

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCHEMA_PATH = os.path.join(ROOT, "include", "dlbpf", "summary.schema.json")

_validator = None


def validator():
    global _validator
    if _validator is None:
        if jsonschema is None:
            raise RuntimeError("python3-jsonschema is not installed (tools/setup-deps.sh installs it)")
        with open(SCHEMA_PATH) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        _validator = jsonschema.Draft202012Validator(schema)
    return _validator


def violations(doc):
    """Where doc breaks the schema, one line each ("processes/0/cuda: ..."); empty when it follows it."""
    errors = sorted(validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    return ["/".join(str(p) for p in e.absolute_path) + ": " + e.message for e in errors]
