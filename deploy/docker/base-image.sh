#!/usr/bin/env bash
# Makes the Debian bookworm base image of the connect-runtime image without a
# registry: debootstrap a minimal root file system from Debian's own mirror,
# bring it up to date with bookworm-security, and `docker import` it. Prints the
# image name on stdout (progress goes to stderr):
#
#   bash deploy/docker/base-image.sh        # -> connect-runtime-base:bookworm
#   bash deploy/docker/base-image.sh tarball  # -> the cached root file system only
#
# Why not FROM debian:bookworm-slim: the machines this project is built and
# tested on reach Debian's mirror and the language registries, not Docker Hub.
# Anyone who can pull debian:bookworm-slim may pass it to build.sh as
# BASE_IMAGE instead; the Dockerfile installs the same packages there.
#
# The root file system is cached as a tarball under
# ${CONNECT_RUNTIME_CACHE:-~/.cache/connect-runtime}/base/, keyed by a hash of
# the package list and of `recipe` (bump it when the steps below change), so a
# second run (or a fresh dockerd, as in the tests) only re-imports it: seconds
# instead of minutes. The image carries the same key as a label; an image with
# another key is replaced. Security updates published after the tarball was
# made are not picked up until it is rebuilt: BASE_REFRESH=1 does that.
#
# Needs root (debootstrap, chroot) and DOCKER_HOST pointing at a dockerd.
set -euo pipefail

cache="${CONNECT_RUNTIME_CACHE:-$HOME/.cache/connect-runtime}/base"
image="${BASE_IMAGE_NAME:-connect-runtime-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
suite=bookworm
# What the runtime needs and nothing else: Spark's JVM, the interpreter (and
# venv, which Debian packages apart), an init that forwards signals and reaps
# orphans (Spark's Python workers), and CA certificates for TLS to Kafka.
packages=(openjdk-17-jre-headless python3 python3-venv tini ca-certificates)
recipe=1

log() { echo "base-image.sh: $*" >&2; }

key="$(printf '%s\n' "$recipe" "$suite" "${packages[@]}" | sha256sum | cut -c1-16)"
tarball="$cache/$suite-$key.tar.gz"
label=org.connect-runtime.base-key
mode="${1:-image}"
case "$mode" in image|tarball) ;; *) log "usage: base-image.sh [tarball]"; exit 2 ;; esac

current=""
[ "$mode" = tarball ] || current="$(docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$image" \
           2>/dev/null || true)"
if [ "$mode" = image ] && [ "$current" = "$key" ] && [ "${BASE_REFRESH:-0}" != 1 ]; then
  echo "$image"
  exit 0
fi

mkdir -p "$cache"
# Two builds on one machine make the tarball once (same idea as kubernetes/tools.sh).
exec 9>"$cache/$suite.lock"
flock 9

root=""
# Whatever happens, nothing stays mounted under the root file system and it is
# removed without crossing into a mount (rm --one-file-system).
cleanup() {
  [ -n "$root" ] || return 0
  findmnt -rno TARGET | grep -F "$root/" | sort -r | xargs -r umount -l || true
  rm -rf --one-file-system "$root"
  root=""
}
trap cleanup EXIT

make_rootfs() {
  root="$(mktemp -d "$cache/rootfs.XXXXXX")"

  # A new machine may not have debootstrap: tools.sh installs Debian's package.
  local debootstrap include
  debootstrap="$(bash "$(dirname "${BASH_SOURCE[0]}")/../kubernetes/tools.sh" debootstrap)"
  log "debootstrap $suite (${packages[*]}) from $mirror into $root (a few minutes)"
  include="$(IFS=,; echo "${packages[*]}")"
  "$debootstrap" --variant=minbase --include="$include" "$suite" "$root" "$mirror" >&2

  log "applying $suite-security and $suite-updates"
  cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # Package scripts of the JRE (ca-certificates-java) run java, which reads /proc.
  mount -t proc proc "$root/proc"
  # APT::Sandbox::User=root: apt's _apt user cannot write the debootstrapped
  # archive cache; there is nothing to sandbox against in a throwaway chroot.
  chroot "$root" apt-get -qq -o APT::Sandbox::User=root update >&2
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -y -qq -o APT::Sandbox::User=root \
    -o Dpkg::Options::=--force-confold upgrade >&2
  chroot "$root" apt-get clean
  umount "$root/proc"

  # Image hygiene: no package lists, caches, docs or host identity. Copyright
  # files stay (licence notices of what the image ships).
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/* \
         "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/tmp/* "$root"/var/tmp/*
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  # dockerd mounts these at run time; the build machine's must not leak in.
  : >"$root/etc/resolv.conf"
  : >"$root/etc/hostname"
  : >"$root/etc/machine-id"
  # Apt in a derived image must not try to start services.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"

  log "writing $tarball"
  tar --numeric-owner --xattrs -C "$root" -cf - . | gzip -1 >"$tarball.tmp"
  mv "$tarball.tmp" "$tarball"
  cleanup
}

if [ ! -f "$tarball" ] || [ "${BASE_REFRESH:-0}" = 1 ]; then
  make_rootfs
fi
[ "$mode" = image ] || { echo "$tarball"; exit 0; }

log "importing $tarball as $image"
# An imported image has no config at all; give it what debian:bookworm-slim has.
docker import \
  --change "LABEL $label=$key" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["bash"]' \
  "$tarball" "$image" >&2
echo "$image"
