#!/usr/bin/env bash
# Pins a Kubernetes release for the harness toolchain: writes tools/kube/vMAJOR.MINOR/{go.mod,go.sum}.
#
#   tools/kube/pin.sh v1.37.1
#
# k8s.io/kubernetes replaces every staging module with ./staging/src/k8s.io/<x>, which a dependent
# module cannot use, so the pin replaces each of them with the published k8s.io/<x> v0.MINOR.PATCH.
# The harness embeds these files (harness/src/toolchain/pins.rs) and builds from them with `go build`.
set -euo pipefail

version=${1:?usage: tools/kube/pin.sh vMAJOR.MINOR.PATCH}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "pin.sh: '$version' is not a release tag like v1.37.1" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
patch=${BASH_REMATCH[2]}
dir="$(cd "$(dirname "$0")" && pwd)/v1.$minor"

go mod download -json "k8s.io/kubernetes@$version" >/dev/null
upstream_mod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$version.mod"

mkdir -p "$dir"
{
  echo "// Kubernetes $version, as built by \`harness toolchain install\`. Written by tools/kube/pin.sh."
  echo "module cloud-provider-harness/tools/kube/v1.$minor"
  echo
  echo "go 1.26.0"
  echo
  echo "replace ("
  grep -E '^\s*k8s\.io/\S+ => \./staging/' "$upstream_mod" |
    awk -v v="v0.$minor.$patch" '{ print "\t" $1 " => " $1 " " v }'
  echo ")"
} >"$dir/go.mod"
rm -f "$dir/go.sum"

cd "$dir"
go get -tool \
  "k8s.io/kubernetes/cmd/kube-apiserver@$version" \
  "k8s.io/kubernetes/cmd/kube-controller-manager@$version" \
  "k8s.io/kubernetes/cmd/kube-scheduler@$version" \
  "k8s.io/kubernetes/cmd/kubectl@$version"
echo "pinned Kubernetes $version in $dir"
