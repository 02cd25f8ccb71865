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

# CI starts from a fresh clone each time: keep cargo's outputs in the user cache dir so a warm
# machine does not rebuild every dependency. Developers keep ./target unless they set it.
use_cached_target_dir() {
  if [[ "${CI:-}" == "true" && -z "${CARGO_TARGET_DIR:-}" ]]; then
    export CARGO_TARGET_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/cloud-provider-harness/cargo-target"
  fi
}
