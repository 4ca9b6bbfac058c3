"""bench/lib.sh's lifted_limits, for the Python bench scripts: one list of the flags that take the
admission limits out of a store benchmark's way."""
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def lifted_limits():
    out = subprocess.run(["bash", "-c", 'source bench/lib.sh; printf "%s\\n" "${lifted_limits[@]}"'],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    return out.split()
