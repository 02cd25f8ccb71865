#!/usr/bin/env bash
# Assembles a kubernetes/kubernetes-shaped git checkout from Go's module cache, for the tests and
# benchmarks of `--kubernetes-source` (a real clone is over what this machine can fetch, and the Go
# module proxy serves no commit of k8s.io/kubernetes).
#
#   tools/kube/checkout-fixture.sh DIR [VERSION]      (VERSION: a release tag, default v1.37.1)
#
# DIR gets the `k8s.io/kubernetes` module at VERSION with every staging module its go.work uses at the
# matching v0.X.Y under staging/src/k8s.io/, the executable bits the module zips drop given back to
# scripts, as one commit tagged `VERSION-fixture.0`: a tag no real release has, so no build of it can
# pass for upstream's. Nothing of Kubernetes is committed to this repository: every file comes from
# the module cache (downloaded through the module proxy when missing).
#
# It prints the commit. The tests make their own commits on top.
set -euo pipefail

die() { printf 'error: %s\n' "$*" >&2; exit 1; }

dir="${1:-}"
version="${2:-v1.37.1}"
[[ -n "$dir" ]] || die "usage: $0 DIR [VERSION]: DIR is where the checkout goes (it must not exist)"
[[ ! -e "$dir" ]] || die "$dir already exists: give a path that does not, or remove it"
[[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "VERSION '$version' is not a release tag such as v1.37.1"
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
command -v go >/dev/null || die "go not found: install Go 1.26 or newer and re-run"
command -v git >/dev/null || die "git not found: install git and re-run"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod
# `go mod download` of module@version works outside any module; from an empty directory, so no
# go.mod or go.work around the caller's directory changes what it resolves.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
module_dir() {
  (cd "$scratch" && go mod download -json "$1@$2") | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'
}

source_dir="$(module_dir k8s.io/kubernetes "$version")"
[[ -d "$source_dir" ]] || die "the Go module proxy does not serve k8s.io/kubernetes $version (go mod download k8s.io/kubernetes@$version)"
mkdir -p "$dir"
cp -R "$source_dir/." "$dir/"
chmod -R u+w "$dir"

# go.work names the staging modules (`./staging/src/k8s.io/<name>`): each is published as k8s.io/<name>.
mapfile -t staging < <(sed -n 's|^\t\./staging/src/k8s.io/\([a-z0-9-]*\)$|\1|p' "$dir/go.work")
[[ ${#staging[@]} -gt 0 ]] || die "$dir/go.work names no staging module: k8s.io/kubernetes $version is older than this script knows"
for name in "${staging[@]}"; do
  from="$(module_dir "k8s.io/$name" "$staging_version")"
  [[ -d "$from" ]] || die "the Go module proxy does not serve k8s.io/$name $staging_version"
  mkdir -p "$dir/staging/src/k8s.io/$name"
  cp -R "$from/." "$dir/staging/src/k8s.io/$name/"
done
chmod -R u+w "$dir/staging"

# Module zips keep no file modes: a file that starts with `#!` was executable upstream.
find "$dir" -type f -size -1000k -print0 | while IFS= read -r -d '' file; do
  if [[ "$(head -c 2 "$file")" == '#!' ]]; then chmod +x "$file"; fi
done

cd "$dir"
git init -q -b master
git -c core.safecrlf=false add -A
GIT_COMMITTER_DATE="2026-01-01T00:00:00Z" GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" \
  git -c user.name=fixture -c user.email=fixture@localhost commit -q -m "k8s.io/kubernetes $version, from Go's module cache"
git tag "$version-fixture.0"
git rev-parse HEAD
