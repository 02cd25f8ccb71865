#!/usr/bin/env bash
# Pins local-upstream-ccm for a pinned Kubernetes release: writes
# tools/local-upstream-ccm/vMAJOR.MINOR/{go.mod,go.sum} requiring k8s.io/cloud-provider,
# k8s.io/component-base and the other k8s.io modules at v0.MINOR.PATCH (the release's own
# staging versions), with what `go mod tidy` selects for the rest.
#
#   tools/local-upstream-ccm/pin.sh v1.37.1
#
# The Go source (*.go here) is shared by every release; the harness embeds it with each release's
# go.mod and go.sum (config/src/pins.rs) and builds it with the toolchain.
set -euo pipefail

version=${1:?usage: tools/local-upstream-ccm/pin.sh vMAJOR.MINOR.PATCH}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "pin.sh: '$version' is not a release tag like v1.37.1" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
staging="v0.$minor.${BASH_REMATCH[2]}"
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/v1.$minor"
export GOTOOLCHAIN=local GOFLAGS=

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here"/*.go "$work/"
cd "$work"
{
  echo "// local-upstream-ccm for Kubernetes $version, as built by \`harness toolchain install\`. Written by tools/local-upstream-ccm/pin.sh."
  echo "module cloud-provider-harness/tools/local-upstream-ccm"
  echo
  echo "go 1.26.0"
} >go.mod
# The release's own go.sum (tools/kube) already holds the checksums of these modules' versions.
cp "$here/../kube/v1.$minor/go.sum" go.sum 2>/dev/null || true
go get "k8s.io/cloud-provider@$staging" "k8s.io/component-base@$staging" "k8s.io/api@$staging" \
  "k8s.io/apimachinery@$staging" "k8s.io/client-go@$staging" "k8s.io/controller-manager@$staging" \
  "k8s.io/apiserver@$staging" "k8s.io/component-helpers@$staging"
go mod tidy
for module in k8s.io/cloud-provider k8s.io/component-base k8s.io/client-go k8s.io/api; do
  selected=$(go list -m -f '{{.Version}}' "$module")
  [[ $selected == "$staging" ]] || { echo "pin.sh: $module resolved to $selected, not $staging" >&2; exit 1; }
done
# What the harness runs, checked the way it runs it: no network, go.mod and go.sum as written.
GOFLAGS=-mod=readonly GOPROXY=off go list -deps . >/dev/null
mkdir -p "$out"
cp go.mod go.sum "$out/"
echo "pinned local-upstream-ccm for Kubernetes $version (k8s.io/cloud-provider $staging) in $out"
