#!/usr/bin/env bash
# Builds the connect-runtime image and prints its tag on stdout (progress goes
# to stderr). Talks to the dockerd named by DOCKER_HOST, like the docker CLI.
#
#   bash deploy/docker/build.sh                                   # connect-runtime:<version>
#   BASE_IMAGE=debian:bookworm-slim bash deploy/docker/build.sh   # a base you can pull
#   IMAGE=registry.example.com/connect-runtime:dev bash deploy/docker/build.sh
#   bash deploy/docker/build.sh inputs    # steps 1 and 2 only, without a dockerd
#
# The image's Python packages come from a wheelhouse made here, on the host, and
# are installed in the image with pip --no-index: the build needs PyPI (once),
# Debian's mirror (once, for the base) and nothing else. Every step is cached
# under ${CONNECT_RUNTIME_CACHE:-~/.cache/connect-runtime}, so a second run only
# rebuilds the project's wheel and lets docker reuse its layers:
#
#   1. the base image (base-image.sh), unless BASE_IMAGE names one;
#   2. the dependency wheels, pinned to the versions installed in .venv (the
#      versions the test suite ran against), kept until those pins change;
#      pyspark is an sdist of 450 MB whose wheel takes minutes to build, so its
#      wheel is also kept apart, by version;
#   3. the project's wheel, built from a copy of the work tree (tracked and
#      untracked files, minus ignored ones), so nothing is written into the clone;
#      the copy gets connect_runtime/build_commit.txt, the clone's HEAD (or COMMIT
#      if set), which GET / reports as "commit";
#   4. docker build of deploy/docker/Dockerfile in a context under the cache.
#
# PYTHON (default .venv/bin/python, made by deploy/setup.sh) builds the wheels;
# it must be Python 3.11, the interpreter of Debian bookworm, for the compiled
# wheels (orjson, confluent-kafka, pydantic-core, ...) to fit the image.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${CONNECT_RUNTIME_CACHE:-$HOME/.cache/connect-runtime}"
python="${PYTHON:-$repo/.venv/bin/python}"
ctx="$cache/image-context"

log() { echo "build.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# "inputs": make the base's root file system and the dependency wheels, the
# slow part on a new machine, and stop before anything needs a dockerd
# (deploy/test.sh runs it beside the tests).
mode="${1:-image}"
case "$mode" in image|inputs) ;; *) die "usage: build.sh [inputs]" ;; esac

[ -x "$python" ] || die "no $python: run deploy/setup.sh first, or set PYTHON"
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || die "$python is not Python 3.11, the image's (Debian bookworm) interpreter"
[ "$mode" = inputs ] || docker version --format '{{.Server.Version}}' >/dev/null \
  || die "no dockerd at ${DOCKER_HOST:-the default socket}; set DOCKER_HOST"

version="$(cd "$repo" && "$python" -c \
  'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
image="${IMAGE:-connect-runtime:$version}"
pip=("$python" -m pip --disable-pip-version-check)

mkdir -p "$ctx"
# One build at a time per cache: the context folder is shared.
exec 9>"$cache/image-context.lock"
flock 9

work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# --- 1. base image -----------------------------------------------------------
base="${BASE_IMAGE:-}"
if [ "$mode" = inputs ]; then
  [ -n "$base" ] || bash "$here/base-image.sh" tarball >/dev/null
elif [ -z "$base" ]; then
  base="$(bash "$here/base-image.sh")"
fi

# --- 2. dependency wheels ----------------------------------------------------
# Pins: what .venv holds, as name==version (constraints cannot carry direct
# URLs or the editable project). Pins of packages the runtime does not need
# (dev tools) are ignored, by pip and by the check below.
"${pip[@]}" freeze --exclude-editable | grep -E '^[A-Za-z0-9._-]+==' >"$work/pins.txt" || true
(cd "$repo" && "$python" -c 'import tomllib; print("\n".join(
  tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))') >"$work/requirements.txt"

# The wheels collected last time still fit when the requirements are the same
# and each wheel still has its pinned version.
deps_current() {
  [ -d "$ctx/wheels/deps" ] && cmp -s "$work/requirements.txt" "$ctx/requirements.txt" \
    && "$python" -c '
import pathlib, re, sys
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
pins = dict(line.strip().split("==", 1) for line in open(sys.argv[1]) if "==" in line)
pins = {norm(name): version for name, version in pins.items()}
wheels = [w.name.split("-") for w in pathlib.Path(sys.argv[2]).glob("*.whl")]
sys.exit(0 if wheels and all(pins.get(norm(w[0])) == w[1] for w in wheels) else 1)
' "$work/pins.txt" "$ctx/wheels/deps"
}

if ! deps_current; then
  pyspark_version="$(grep -i '^pyspark==' "$work/pins.txt" | cut -d= -f3 || true)"
  [ -n "$pyspark_version" ] || die "pyspark is not installed in $python's environment"
  pyspark_dir="$cache/wheels/pyspark-$pyspark_version"
  if ! ls "$pyspark_dir"/pyspark-*.whl >/dev/null 2>&1; then
    log "building the pyspark $pyspark_version wheel into $pyspark_dir (once per version)"
    rm -rf "$pyspark_dir.tmp"
    "${pip[@]}" wheel -q --no-deps -w "$pyspark_dir.tmp" "pyspark==$pyspark_version" >&2
    rm -rf "$pyspark_dir" && mv "$pyspark_dir.tmp" "$pyspark_dir"
  fi
  log "collecting the dependency wheels (pinned to $python's environment)"
  rm -rf "$ctx/wheels/deps.tmp"
  # --find-links: pip prefers the cached pyspark wheel to PyPI's sdist.
  "${pip[@]}" wheel -q -w "$ctx/wheels/deps.tmp" -c "$work/pins.txt" \
    --find-links "$pyspark_dir" -r "$work/requirements.txt" >&2
  # A hard link instead of pip's second 450 MB copy of the pyspark wheel.
  ln -f "$pyspark_dir"/pyspark-*.whl "$ctx/wheels/deps.tmp/"
  rm -rf "$ctx/wheels/deps" && mv "$ctx/wheels/deps.tmp" "$ctx/wheels/deps"
  cp "$work/requirements.txt" "$ctx/requirements.txt"
fi

[ "$mode" = image ] || { log "the image's inputs are ready (${SECONDS}s)"; exit 0; }

# --- 3. the project's wheel --------------------------------------------------
log "building the connect-runtime $version wheel"
src="$work/src"
mkdir -p "$src"
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Existing files only: a tracked file deleted in the work tree is skipped.
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard \
     | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
     | tar --null -T - -cf -) | tar -xf - -C "$src"
else
  tar -C "$repo" --exclude=.git --exclude=.venv --exclude='*.egg-info' --exclude=build \
      --exclude=__pycache__ -cf - . | tar -xf - -C "$src"
fi
# The commit the image is built from, for GET /'s "commit" (connect_runtime/build_info.py):
# HEAD of the clone, or COMMIT when the sources are not a git clone.
commit="${COMMIT:-}"
if [ -z "$commit" ] && [ -e "$repo/.git" ]; then
  commit="$(git -C "$repo" rev-parse --verify HEAD 2>/dev/null || true)"
fi
if [ -n "$commit" ]; then
  printf '%s\n' "$commit" >"$src/connect_runtime/build_commit.txt"
else
  log "not a git clone and no COMMIT given: GET / will report commit \"unknown\""
fi
rm -rf "$ctx/wheels/project"
# No build isolation: setuptools and wheel come from .venv (the dev extra), so
# this step needs no index. SOURCE_DATE_EPOCH fixes the timestamps inside the
# wheel: the same sources give the same bytes, and docker reuses its layer.
SOURCE_DATE_EPOCH="$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 315532800)" \
  "${pip[@]}" wheel -q --no-deps --no-build-isolation -w "$ctx/wheels/project" "$src" >&2

# --- 4. docker build ---------------------------------------------------------
install -m 644 "$here/Dockerfile" "$here/image-defaults.properties" "$ctx/"
install -m 755 "$here/entrypoint.sh" "$ctx/"
printf '%s\n' '**/*.tmp' requirements.txt >"$ctx/.dockerignore"
# Without the buildx plugin (Debian's docker.io has none) the CLI must be told
# to use the classic builder; the Dockerfile suits both.
docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0
log "docker build $image FROM $base"
docker build --network host --build-arg "BASE_IMAGE=$base" --build-arg "VERSION=$version" \
  --build-arg "REVISION=${commit:-unknown}" \
  -t "$image" "$ctx" >&2
log "built $image in ${SECONDS}s"
echo "$image"
