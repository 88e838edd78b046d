"""Stand-in for PyPA's get-pip.py, which ansible-test downloads from ci-files.testing.ansible.com.

That host is not reachable here (only the Python package index is). ansible-test creates
each sanity test's virtual environment without pip and runs its cached bootstrap script
(``~/.ansible/test/cache/get_pip_<version>.py``) with pip's install arguments, for example
``pip==24.2 --disable-pip-version-check --no-setuptools --no-wheel``. This stand-in does
the same with what Python ships and the package index: ``ensurepip`` puts the bundled pip
into the environment, which then installs the requested packages from the index.
scripts/sanity.sh copies it into that cache when the real script is absent.
"""
import subprocess
import sys

GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")


def main(argv):
    """Install pip, then ``pip install`` ``argv`` minus get-pip's own options; return the exit code (int)."""
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
    args = [arg for arg in argv if arg not in GET_PIP_ONLY]
    return subprocess.call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
