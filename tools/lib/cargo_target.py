"""Where cargo puts evidence-store's binary: `cargo metadata`'s `target_directory`, which
follows `CARGO_TARGET_DIR` and `build.target-dir` in a cargo config as cargo itself does;
without cargo, `$CARGO_TARGET_DIR`, else `target/` of this clone.

Every tool's default `--bin` comes from here, and the shell scripts ask it too:

    python3 tools/lib/cargo_target.py [debug|release|PROFILE]   # prints the binary's path
"""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def target_dir() -> Path:
    try:
        out = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
        ).stdout
        return Path(json.loads(out)["target_directory"])
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        given = os.environ.get("CARGO_TARGET_DIR")
        return (ROOT / given) if given else ROOT / "target"


def binary(profile: str = "debug") -> Path:
    """The evidence-store binary a `cargo build` of `profile` makes."""
    return target_dir() / profile / "evidence-store"


if __name__ == "__main__":
    print(binary(sys.argv[1] if len(sys.argv) > 1 else "debug"))
