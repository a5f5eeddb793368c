#!/usr/bin/env bash
# Builds or installs the tools the Kubernetes checks need, once per machine, and
# prints the path of the one asked for on stdout (progress goes to stderr):
#
#   tools.sh helm            helm, built from the Go module proxy
#   tools.sh kube-apiserver  kube-apiserver, built from the Go module proxy
#   tools.sh etcd            etcd from Debian's etcd-server package
#   tools.sh dockerd         dockerd from Debian's docker.io package
#
# Built tools are cached outside the clone, keyed by version, under
# ${CONNECT_RUNTIME_CACHE:-~/.cache/connect-runtime}: the first run on a machine
# builds them (helm about 6 minutes, kube-apiserver about 10 on 2 cores), later
# runs print the cached path at once. docs/kubernetes.md, "How the chart is
# checked", says why each one is needed.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v4.3.1}"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
cache="${CONNECT_RUNTIME_CACHE:-$HOME/.cache/connect-runtime}"

log() { echo "tools.sh: $*" >&2; }

# Runs "$@" holding an exclusive lock on $1.lock, so two test runs on one machine
# build a tool once rather than twice into the same folder.
locked() {
  local target="$1"; shift
  mkdir -p "$(dirname "$target")"
  exec 9>"$target.lock"
  flock 9
  "$@"
  exec 9>&-
}

build_helm() {
  local dir="$cache/helm-$HELM_VERSION"
  if [ ! -x "$dir/helm" ]; then
    log "building helm $HELM_VERSION from the Go module proxy into $dir (about 6 minutes the first time)"
    # Helm reports the version set here; without it, 'helm version' says v4 main.
    GOBIN="$dir.tmp" CGO_ENABLED=0 go install -trimpath \
      -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
      "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/helm"
}

build_kube_apiserver() {
  local dir="$cache/kube-apiserver-$KUBERNETES_VERSION"
  if [ ! -x "$dir/kube-apiserver" ]; then
    log "building kube-apiserver $KUBERNETES_VERSION from the Go module proxy into $dir (about 10 minutes the first time)"
    local src="$dir.src"
    rm -rf "$src" && mkdir -p "$src"
    # k8s.io/kubernetes is not meant to be required: its go.mod replaces each
    # k8s.io/<staging> module with ./staging/src/..., which a dependency's
    # replace directives cannot do. A wrapper module requires it and replaces
    # each staging module with its published v0.<minor>.<patch> release instead.
    local staging_version="v0.${KUBERNETES_VERSION#v1.}"
    local mod
    mod="$(cd "$src" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" \
           | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
    {
      echo "module connect-runtime.local/kube-apiserver-build"
      echo
      echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
      echo
      echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
      echo
      echo "replace ("
      # Only the staging modules that are published: sample-* are not, and
      # kube-apiserver needs none of them.
      grep -E '=> \./staging/' "$mod" | awk '{print $1}' | grep -v '^k8s.io/sample-' \
        | while read -r m; do echo "	$m => $m $staging_version"; done
      echo ")"
    } >"$src/go.mod"
    (cd "$src" && go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$KUBERNETES_VERSION" >&2)
    # kubectl and helm parse the server's version; an unset one ("v0.0.0-master")
    # makes them refuse to talk to it.
    local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
    local ldflags="-s -w" pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" \
       -o "$src/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2)
    mkdir -p "$dir.tmp" && mv "$src/kube-apiserver" "$dir.tmp/"
    rm -rf "$dir" "$src" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/kube-apiserver"
}

# Debian packages: installed when missing, which needs root (as in CI).
debian_tool() {
  local binary="$1" package="$2"
  if ! command -v "$binary" >/dev/null && [ ! -x "/usr/bin/$binary" ]; then
    log "installing Debian's $package"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >&2 \
      || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >&2; }
  fi
  command -v "$binary" 2>/dev/null || echo "/usr/bin/$binary"
}

case "${1:-}" in
  helm) locked "$cache/helm-$HELM_VERSION" build_helm ;;
  kube-apiserver) locked "$cache/kube-apiserver-$KUBERNETES_VERSION" build_kube_apiserver ;;
  etcd) debian_tool etcd etcd-server ;;
  dockerd) debian_tool dockerd docker.io ;;
  debootstrap) debian_tool debootstrap debootstrap ;;
  *) echo "usage: tools.sh helm|kube-apiserver|etcd|dockerd|debootstrap" >&2; exit 2 ;;
esac
