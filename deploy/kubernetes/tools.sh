#!/usr/bin/env bash
# Builds or installs the tools the Kubernetes checks need, once per machine, and
# prints the path of the one asked for on stdout (progress goes to stderr):
#
#   tools.sh helm            helm, built from the Go module proxy
#   tools.sh kube-apiserver  kube-apiserver, built from the Go module proxy
#   tools.sh etcd            etcd, built from the Go module proxy
#   tools.sh dockerd         dockerd from Debian's docker.io package
#   tools.sh toxiproxy       Toxiproxy's server, built from the Go module proxy
#                            (the partition suite's latency: tests/partitions/)
#   tools.sh debian-packages [PACKAGE...]
#                            every missing Debian tool, and the packages named,
#                            in one apt-get call
#
# Built tools are cached outside the clone, keyed by version, under
# ${CONNECT_RUNTIME_CACHE:-~/.cache/connect-runtime}: the first run on a machine
# builds them (helm about 6 minutes, kube-apiserver about 10 on 2 cores), later
# runs print the cached path at once. docs/kubernetes.md, "How the chart is
# checked", says why each one is needed.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v4.3.1}"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.13.1}"
CRI_TOOLS_VERSION="${CRI_TOOLS_VERSION:-v1.34.0}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
TOXIPROXY_VERSION="${TOXIPROXY_VERSION:-v2.5.0}"
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

# The Kubernetes binaries of one version, built together (one go build shares
# its cache: the second binary costs a fraction of the first).
KUBERNETES_BINARIES="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"

build_kubernetes() {
  local dir="$cache/kubernetes-$KUBERNETES_VERSION"
  local missing="" b
  for b in $KUBERNETES_BINARIES; do [ -x "$dir/$b" ] || missing=1; done
  if [ -n "$missing" ]; then
    log "building Kubernetes $KUBERNETES_VERSION ($KUBERNETES_BINARIES) from the Go module proxy into $dir (about 15 minutes the first time)"
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
      echo "module connect-runtime.local/kubernetes-build"
      echo
      echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
      echo
      echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
      echo
      echo "replace ("
      # Only the staging modules that are published: sample-* are not, and
      # no binary built here needs them.
      grep -E '=> \./staging/' "$mod" | awk '{print $1}' | grep -v '^k8s.io/sample-' \
        | while read -r m; do echo "	$m => $m $staging_version"; done
      echo ")"
    } >"$src/go.mod"
    local pkgs=""
    for b in $KUBERNETES_BINARIES; do pkgs+=" k8s.io/kubernetes/cmd/$b"; done
    # shellcheck disable=SC2086
    (cd "$src" && for p in $pkgs; do go get -tool "$p@$KUBERNETES_VERSION" >&2; done)
    # kubectl and helm parse the server's version; an unset one ("v0.0.0-master")
    # makes them refuse to talk to it.
    local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
    local ldflags="-s -w" pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    mkdir -p "$src/bin"
    # shellcheck disable=SC2086
    (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$src/bin/" $pkgs >&2)
    rm -rf "$dir.tmp" && mv "$src/bin" "$dir.tmp"
    rm -rf "$dir" "$src" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

# A Go program installed from the Go module proxy into $cache/<name>-<version>.
go_tool() {
  local name="$1" version="$2" package="$3" dir="$cache/$1-$2"
  if [ ! -x "$dir/$name" ]; then
    log "building $name $version from the Go module proxy into $dir"
    rm -rf "$dir.tmp"
    GOBIN="$dir.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$package@$version" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/$name"
}

# Toxiproxy's server: its package is cmd/server, so go install names it "server".
build_toxiproxy() {
  local dir="$cache/toxiproxy-$TOXIPROXY_VERSION"
  if [ ! -x "$dir/toxiproxy-server" ]; then
    log "building toxiproxy $TOXIPROXY_VERSION from the Go module proxy into $dir"
    rm -rf "$dir.tmp"
    GOBIN="$dir.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
      "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" >&2
    mv "$dir.tmp/server" "$dir.tmp/toxiproxy-server"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/toxiproxy-server"
}

# etcd from the Go module proxy. Debian's etcd-server is 3.4, which lacks the
# watch progress requests a 1.37 API server needs for watches that ask for
# their initial events (client-go and fabric8 informers, the Spark driver's
# included): every such watch fails with "RequestWatchProgress is disabled".
# go.etcd.io/etcd/server/v3 has replace directives, so it is built from a
# wrapper module, as Kubernetes is.
build_etcd() {
  local dir="$cache/etcd-$ETCD_VERSION"
  if [ ! -x "$dir/etcd" ]; then
    log "building etcd $ETCD_VERSION from the Go module proxy into $dir (a few minutes the first time)"
    local src="$dir.src"
    rm -rf "$src" && mkdir -p "$src"
    {
      echo "module connect-runtime.local/etcd-build"
      echo
      echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
      echo
      echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    } >"$src/go.mod"
    (cd "$src" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2 \
       && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$src/etcd" go.etcd.io/etcd/server/v3 >&2)
    mkdir -p "$dir.tmp" && mv "$src/etcd" "$dir.tmp/"
    rm -rf "$dir" "$src" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/etcd"
}

# The pod sandbox's "pause" process, compiled from the pause.c that
# k8s.io/kubernetes ships (build/pause/linux), static, so its image needs
# nothing else.
build_pause() {
  local dir="$cache/pause-$KUBERNETES_VERSION"
  if [ ! -x "$dir/pause" ]; then
    local src
    src="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" \
           | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/build/pause/linux/pause.c"
    log "compiling $src into $dir"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    cc -Os -Wall -static -DVERSION="$KUBERNETES_VERSION" -o "$dir.tmp/pause" "$src" >&2
    strip "$dir.tmp/pause"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/pause"
}

# Debian packages: installed when missing, which needs root (as in CI).
# binary (a name on PATH, or a path) -> the package that brings it.
DEBIAN_TOOLS="containerd:containerd runc:runc iptables:iptables conntrack:conntrack
  busybox:busybox-static /usr/lib/cni/bridge:containernetworking-plugins dockerd:docker.io
  debootstrap:debootstrap"

has_binary() { command -v "$1" >/dev/null 2>&1 || [ -x "$1" ] || [ -x "/usr/bin/$1" ]; }

# The packages of DEBIAN_TOOLS whose binary is missing, one a line.
missing_debian() {
  local pair
  for pair in $DEBIAN_TOOLS; do has_binary "${pair%%:*}" || echo "${pair#*:}"; done
}

# Installs Debian packages in one apt-get call (one dpkg run is much faster
# than one per package); refreshes the package lists only if the first try fails.
apt_install() {
  [ "$#" -gt 0 ] || return 0
  log "installing Debian's $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2 \
    || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2; }
}

debian_tool() {
  local binary="$1" package="$2"
  has_binary "$binary" || apt_install "$package"
  command -v "$binary" 2>/dev/null || echo "/usr/bin/$binary"
}

case "${1:-}" in
  helm) locked "$cache/helm-$HELM_VERSION" build_helm ;;
  kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl)
    echo "$(locked "$cache/kubernetes-$KUBERNETES_VERSION" build_kubernetes)/$1" ;;
  coredns) locked "$cache/coredns-$COREDNS_VERSION" go_tool coredns "$COREDNS_VERSION" github.com/coredns/coredns ;;
  crictl) locked "$cache/crictl-$CRI_TOOLS_VERSION" go_tool crictl "$CRI_TOOLS_VERSION" sigs.k8s.io/cri-tools/cmd/crictl ;;
  pause) locked "$cache/pause-$KUBERNETES_VERSION" build_pause ;;
  containerd) debian_tool containerd containerd ;;
  runc) debian_tool runc runc ;;
  iptables) debian_tool iptables iptables ;;
  conntrack) debian_tool conntrack conntrack ;;
  busybox) debian_tool busybox busybox-static ;;
  cni-plugins) debian_tool /usr/lib/cni/bridge containernetworking-plugins >/dev/null; echo /usr/lib/cni ;;
  etcd) locked "$cache/etcd-$ETCD_VERSION" build_etcd ;;
  dockerd) debian_tool dockerd docker.io ;;
  debootstrap) debian_tool debootstrap debootstrap ;;
  toxiproxy) locked "$cache/toxiproxy-$TOXIPROXY_VERSION" build_toxiproxy ;;
  # Every Debian tool above, and the extra packages named, in one apt-get call.
  debian-packages) shift; mapfile -t missing < <(missing_debian); apt_install "${missing[@]}" "$@" ;;
  *) echo "usage: tools.sh debian-packages [PACKAGE...]|helm|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl|coredns|crictl|pause|containerd|runc|iptables|conntrack|busybox|cni-plugins|etcd|dockerd|debootstrap|toxiproxy" >&2; exit 2 ;;
esac
