"""Which build of connect-runtime is running: the ``commit`` of ``GET /``.

Kafka Connect reports the commit its jars were built from; we report the git
commit of the code this process runs, found once (:func:`build_commit` caches it;
the herder reads it when it is built, never per request):

1. Running from a git checkout (the folder above this package holds ``.git``, as
   with ``pip install -e .`` or ``PYTHONPATH``): that checkout's ``HEAD``, as
   ``git rev-parse HEAD`` says it. Without a ``git`` program (or one that refuses
   the repository) the commit is read from ``.git`` itself.
2. Installed from a wheel (the container image, ``pip install``): the commit
   :data:`COMMIT_FILE` holds, written beside this module when the wheel was built
   (``deploy/docker/build.sh`` writes it into the copy of the sources it builds
   from). The file is never in the repository (``.gitignore``).
3. Otherwise ``unknown``, as before.

A checkout's commit is ``HEAD``: changes not committed yet are not in it.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import subprocess
from pathlib import Path

__all__ = ["COMMIT_FILE", "UNKNOWN", "build_commit", "checkout_commit", "find_commit"]

log = logging.getLogger(__name__)

COMMIT_FILE = "build_commit.txt"
"""Beside this module in a built wheel: the commit the wheel was built from."""
UNKNOWN = "unknown"

_PACKAGE = Path(__file__).resolve().parent
# SHA-1, or SHA-256 for repositories created with --object-format=sha256.
_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_GIT_TIMEOUT_S = 10.0


@functools.cache
def build_commit() -> str:
    """The commit of the running build (module docstring), found on the first call."""
    commit = find_commit(_PACKAGE)
    log.debug("running build: commit %s", commit)
    return commit


def find_commit(package: Path) -> str:
    """The rules of the module docstring for the package folder ``package``."""
    return checkout_commit(package.parent) or _baked_commit(package) or UNKNOWN


def checkout_commit(root: Path) -> str | None:
    """``HEAD`` of the git checkout whose top folder is ``root``; None if ``root`` is
    not one (a folder above it being one does not count: site-packages may live
    inside someone's repository)."""
    dot_git = root / ".git"
    if not dot_git.exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "HEAD"],
                             capture_output=True, text=True, timeout=_GIT_TIMEOUT_S,
                             check=False, stdin=subprocess.DEVNULL,
                             # GIT_DIR and the like would name another repository.
                             env={k: v for k, v in os.environ.items()
                                  if not k.startswith("GIT_")})
        commit = out.stdout.strip()
        if out.returncode == 0 and _COMMIT.fullmatch(commit):
            return commit
        log.debug("git rev-parse HEAD in %s failed: %s", root, out.stderr.strip())
    except (OSError, subprocess.SubprocessError) as e:
        log.debug("cannot run git in %s: %s", root, e)
    return _read_head(dot_git)


def _baked_commit(package: Path) -> str | None:
    try:
        commit = (package / COMMIT_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return commit if _COMMIT.fullmatch(commit) else None


def _read_head(dot_git: Path) -> str | None:
    """``HEAD`` read from the repository's files: a detached ``HEAD`` holds the commit,
    otherwise it names a branch, whose commit is in a loose ref file or in
    ``packed-refs``. ``.git`` may be a file pointing elsewhere (worktrees,
    submodules); a worktree's branches live in the common directory."""
    try:
        git_dir = dot_git
        if dot_git.is_file():
            pointer = dot_git.read_text().strip()
            if not pointer.startswith("gitdir:"):
                return None
            git_dir = (dot_git.parent / pointer.removeprefix("gitdir:").strip()).resolve()
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
        head = (git_dir / "HEAD").read_text().strip()
        if _COMMIT.fullmatch(head):
            return head
        if not head.startswith("ref:"):
            return None
        ref = head.removeprefix("ref:").strip()
        for base in (git_dir, common):
            loose = base / ref
            if loose.is_file():
                commit = loose.read_text().strip()
                return commit if _COMMIT.fullmatch(commit) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                commit, _, name = line.partition(" ")
                if name == ref and _COMMIT.fullmatch(commit):
                    return commit
    except (OSError, UnicodeDecodeError):
        pass
    return None
