"""What the SDK scripts share: each check run and reported on its own line, the run going
on after a failure, and the exit status saying whether any failed."""

import sys
import traceback

failures = []


def check(name, fn):
    try:
        fn()
        print(f"ok   {name}", flush=True)
    except Exception:  # noqa: BLE001 - every failure is reported, the run goes on
        failures.append(name)
        print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def finish():
    """Prints the tally and exits 1 if any check failed."""
    if failures:
        print(f"{len(failures)} failed: {failures}")
        sys.exit(1)
    print("all passed")
    sys.exit(0)
