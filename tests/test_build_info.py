"""Where ``GET /``'s ``commit`` comes from (connect_runtime.build_info), on real git
repositories made here: a checkout's HEAD (with git, or read from ``.git`` without
it), the commit baked into a wheel, or "unknown"."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from connect_runtime import build_info
from connect_runtime.build_info import COMMIT_FILE, UNKNOWN, find_commit

BAKED = "89abcdef0123456789abcdef0123456789abcdef"
GIT = shutil.which("git") or "git"  # found before a test takes git off PATH


def git(cwd: Path, *args: str) -> str:
    return subprocess.run([GIT, "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "init.defaultBranch=main", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def checkout(root: Path, commits: int = 2) -> Path:
    """A repository at ``root`` with ``commits`` commits and a package folder; returns
    the package folder (where connect_runtime would be)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    package = root / "connect_runtime"
    package.mkdir()
    for n in range(commits):
        (package / "__init__.py").write_text(f"# {n}\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"commit {n}")
    return package


@pytest.fixture
def no_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No git program on PATH: the commit must be read from .git itself."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


def test_a_checkout_reports_its_head(tmp_path: Path) -> None:
    package = checkout(tmp_path / "repo")
    assert find_commit(package) == git(tmp_path / "repo", "rev-parse", "HEAD")


def test_the_checkout_wins_over_a_baked_commit(tmp_path: Path) -> None:
    package = checkout(tmp_path / "repo")
    (package / COMMIT_FILE).write_text(BAKED)
    assert find_commit(package) == git(tmp_path / "repo", "rev-parse", "HEAD")


@pytest.mark.usefixtures("no_git")
def test_without_git_a_branch_head_is_read_from_loose_and_packed_refs(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    package = checkout(root)
    head = git(root, "rev-parse", "HEAD")
    assert find_commit(package) == head  # refs/heads/main, a loose file
    git(root, "pack-refs", "--all", "--prune")
    assert not (root / ".git" / "refs" / "heads" / "main").exists()
    assert find_commit(package) == head  # now only in packed-refs


def test_without_git_a_detached_head_and_a_worktree_are_read_too(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    root = tmp_path / "repo"
    package = checkout(root, commits=3)
    first = git(root, "rev-list", "--max-parents=0", "HEAD")
    linked = tmp_path / "linked"
    git(root, "worktree", "add", "-q", "-b", "side", str(linked), first)
    git(root, "checkout", "-q", "--detach", "HEAD~1")
    detached = git(root, "rev-parse", "HEAD")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert find_commit(package) == detached
    assert (linked / ".git").is_file()  # "gitdir: .../worktrees/linked"
    assert find_commit(linked / "connect_runtime") == first


def test_an_installed_package_reports_the_baked_commit(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "connect_runtime"
    package.mkdir(parents=True)
    (package / COMMIT_FILE).write_text(BAKED + "\n")
    assert find_commit(package) == BAKED


def test_a_repository_further_up_does_not_count(tmp_path: Path) -> None:
    """A venv inside someone's repository: its site-packages is not a checkout of ours."""
    checkout(tmp_path / "project")
    package = tmp_path / "project" / ".venv" / "site-packages" / "connect_runtime"
    package.mkdir(parents=True)
    assert find_commit(package) == UNKNOWN
    (package / COMMIT_FILE).write_text(BAKED)
    assert find_commit(package) == BAKED


@pytest.mark.parametrize("content", [None, "", "not a commit\n", "abc123", BAKED + "x"])
def test_otherwise_the_commit_is_unknown(tmp_path: Path, content: str | None) -> None:
    package = tmp_path / "connect_runtime"
    package.mkdir()
    if content is not None:
        (package / COMMIT_FILE).write_text(content)
    assert find_commit(package) == UNKNOWN


@pytest.mark.usefixtures("no_git")
def test_a_broken_git_folder_is_unknown_not_an_error(tmp_path: Path) -> None:
    package = tmp_path / "connect_runtime"
    package.mkdir()
    (tmp_path / ".git").write_text("not a pointer\n")
    assert find_commit(package) == UNKNOWN
    (tmp_path / ".git").unlink()
    (tmp_path / ".git").mkdir()
    assert find_commit(package) == UNKNOWN  # no HEAD file


def test_the_running_build_is_found_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []

    def counting(package: Path) -> str:
        calls.append(package)
        return BAKED

    build_info.build_commit.cache_clear()
    monkeypatch.setattr(build_info, "find_commit", counting)
    try:
        assert build_info.build_commit() == BAKED
        assert build_info.build_commit() == BAKED
        assert calls == [Path(build_info.__file__).resolve().parent]
    finally:
        build_info.build_commit.cache_clear()
