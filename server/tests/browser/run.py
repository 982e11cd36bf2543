#!/usr/bin/env python3
"""Runs the browser tests of the web UI (scripts/test calls this).

Needs Debian's chromium (/usr/bin/chromium, or $CHROMIUM) and the Python
`playwright` package; the workspace binaries must be built. Without the
browser or the package the tests are skipped with a message, unless
LLAMA_SWAP_REQUIRE_ALL=1 (set by .ci/run): then that is a failure.

    python3 server/tests/browser/run.py                 # every test
    python3 server/tests/browser/run.py -k Queue        # some of them
    python3 server/tests/browser/run.py --screenshots docs/ui

The tests are the test_*.py files here; they share one Chromium and one server
(uitest.Shared), closed when the run ends.
"""

from __future__ import annotations

import os
import shutil
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def missing() -> str | None:
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not (Path(chromium).exists() or shutil.which(chromium)):
        return f"no Chromium at {chromium} (apt-get install chromium)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed (pip install playwright)"
    return None


def main() -> int:
    args = sys.argv[1:]
    reason = missing()
    if reason:
        if os.environ.get("LLAMA_SWAP_REQUIRE_ALL") == "1":
            print(f"browser tests cannot run: {reason}", file=sys.stderr)
            return 1
        print(f"browser tests skipped: {reason}", file=sys.stderr)
        return 0
    if args[:1] == ["--screenshots"]:
        import screenshots

        return screenshots.main(Path(args[1]) if len(args) > 1 else HERE.parents[2] / "docs" / "ui")
    import uitest

    # Named tests (test_models.Models...) run alone; otherwise every module.
    named = any(a.startswith("test_") for a in args)
    names = [] if named else sorted(p.stem for p in HERE.glob("test_*.py"))
    argv = [sys.argv[0], "-v", *args, *names]
    try:
        program = unittest.main(module=None, argv=argv, exit=False)
    finally:
        uitest.Shared.close()
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
