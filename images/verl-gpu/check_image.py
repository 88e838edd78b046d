"""Check, inside a freshly built node image, that the pinned packages are the ones Python imports.

Usage: ``python check_image.py REQUIREMENTS_FILE`` with the venv's Python.

Reads every ``name==version`` line of the requirements file (pip's format; extras
such as ``ray[default]`` are stripped, comments and unpinned lines skipped) and
compares the version ``importlib.metadata`` reports for that distribution in this
interpreter (the venv first, then the base image's site-packages it sees).
Prints one ``ok`` line per pin and the interpreter's version.

Exit status: 0 when every pin matches; 1 naming each distribution that is missing
or has another version (a base image package shadowing the pin, or a failed install).
"""
import importlib.metadata
import re
import sys

PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")


def pins(path):
    """Return [(distribution, version)] for the ``==`` pins of a requirements file (str path)."""
    found = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            match = PIN.match(line)
            if match:
                found.append((match.group(1), match.group(2)))
    return found


def main(argv):
    """Compare each pin with the installed version; return the exit status (0 or 1)."""
    if len(argv) != 2:
        print("usage: check_image.py REQUIREMENTS_FILE", file=sys.stderr)
        return 1
    problems = []
    for name, wanted in pins(argv[1]):
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{name}: not installed (wanted {wanted})")
            continue
        if have != wanted:
            problems.append(f"{name}: {have} installed, {wanted} pinned")
        else:
            print(f"ok {name}=={have}")
    print(f"python {sys.version.split()[0]} at {sys.executable}")
    for problem in problems:
        print(f"image check FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
