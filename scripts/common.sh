# Shared by scripts/quickstart and scripts/test: checks the toolchains a fresh machine needs and
# keeps build outputs in caches that outlive a fresh clone.
# shellcheck shell=bash

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

say() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

require_toolchains() {
  command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs) and re-run"
  command -v go >/dev/null || die "go not found: install Go 1.26 or newer (it builds the Kubernetes binaries) and re-run"
}

# moto, the built-in `aws` provider's cloud, is installed by `harness toolchain install --all` into a
# virtualenv: that needs python3 and its venv module (Debian's python3-venv), installed if missing.
require_python_venv() {
  python3 -c 'import venv, ensurepip' 2>/dev/null && return
  say "installing python3 and python3-venv from Debian's packages (moto runs in a virtualenv)"
  local sudo=()
  [[ "$(id -u)" == 0 ]] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y --no-install-recommends python3 python3-venv >&2 \
    || { "${sudo[@]}" apt-get update >&2 && "${sudo[@]}" apt-get install -y --no-install-recommends python3 python3-venv >&2; } \
    || die "could not install python3-venv: install it (apt-get install python3-venv) and re-run"
}

# Real nodes (`harness cluster up --node-kind real`, tests/real_nodes.rs) run pods with Debian's
# runc and CNI plugins, pack images with a busybox and a pause built with make and gcc, and set up their
# namespaces with util-linux, iproute2 and iptables: installed if missing (as root; real nodes need
# root anyway).
node_packages=(runc containernetworking-plugins make bzip2 gcc libc6-dev iproute2 iptables util-linux)
require_node_packages() {
  # The Debian-based node images (nginx, glibc-dns-testing) are made of packages `apt-get download`
  # fetches (never installed): that needs the package lists.
  if ! apt-cache show nginx bind9-dnsutils >/dev/null 2>&1; then
    say "updating Debian's package lists (node images are made of downloaded packages)"
    local sudo=()
    [[ "$(id -u)" == 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update >&2 || die "apt-get update failed: the node images need Debian's package lists"
  fi
  install_debian_packages "what real nodes need" "${node_packages[@]}"
}

# Installs those of the Debian packages given after WHAT that are not installed yet (as root, or
# with sudo), saying they are WHAT.
install_debian_packages() {
  local what="$1" missing=()
  shift
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
  done
  [[ ${#missing[@]} -eq 0 ]] && return
  say "installing $what from Debian's packages: ${missing[*]}"
  local sudo=()
  [[ "$(id -u)" == 0 ]] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
    || { "${sudo[@]}" apt-get update >&2 && "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2; } \
    || die "could not install ${missing[*]}: install them (apt-get install ${missing[*]}) and re-run"
}

# The `openstack` provider's cloud (`harness cluster up --cloud openstack`) runs Debian's MariaDB
# (every OpenStack service's database) and RabbitMQ (Nova's message bus) as processes of the
# cluster: installed if missing; `harness toolchain install --all` checks for them before it builds
# anything. Each cloud declares these (`CloudKind::debian_packages`), and a unit test of
# local-cluster holds this line to the declarations.
cloud_packages=(mariadb-server rabbitmq-server)
require_cloud_packages() {
  install_debian_packages "what the emulated clouds need" "${cloud_packages[@]}"
}

# CI starts from a fresh clone each time: keep cargo's outputs in the user cache dir so a warm
# machine does not rebuild every dependency. Developers keep ./target unless they set it.
use_cached_target_dir() {
  if [[ "${CI:-}" == "true" && -z "${CARGO_TARGET_DIR:-}" ]]; then
    export CARGO_TARGET_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/cloud-provider-harness/cargo-target"
    # CI builds each checkout once: incremental state only fills the cache (8+ GB) without speeding it up.
    export CARGO_INCREMENTAL=0
  fi
}

# Downloads into Go's module cache the modules `harness toolchain install` builds the default
# toolchain from: the newest pinned Kubernetes minor's module (the default release is the newest)
# and the node and image tools'. Network-bound, so it overlaps the harness's cargo build.
prefetch_go_modules() {
  local newest
  newest="$(printf '%s\n' tools/kube/v1.*/ | sort -V | tail -1)"
  for module in "$newest" tools/kube/{containerd,coredns,etcd,netproxy,registry,wget}; do
    go -C "$module" mod download
  done
}
