#!/usr/bin/env bash
# Pins cloud-provider-openstack's CCM for the `openstack` provider: writes
# tools/openstack/vMAJOR.MINOR/{go.mod,go.sum}.
#
#   tools/openstack/pin.sh v1.36.0
#
# A wrapper module requiring k8s.io/cloud-provider-openstack at the release tag, with the CCM's
# main package as its `tool`, built unmodified. Upstream's go.mod replaces several k8s.io staging
# modules (k8s.io/kubernetes requires them at v0.0.0); a dependency's replace directives are
# ignored, so the wrapper copies that block from the release's own go.mod. The folder is named
# after the Kubernetes minor the CCM release goes with.
set -euo pipefail

version=${1:?usage: tools/openstack/pin.sh vMAJOR.MINOR.PATCH}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "pin.sh: '$version' is not a release tag like v1.36.0" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
dir="$(cd "$(dirname "$0")" && pwd)/v1.$minor"
module=k8s.io/cloud-provider-openstack
export GOTOOLCHAIN=local GOFLAGS=

upstream=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f $upstream ]] || { echo "pin.sh: the module proxy has no go.mod for $module@$version" >&2; exit 1; }
mkdir -p "$dir"
{
  echo "// cloud-provider-openstack $version, as built by \`harness toolchain install\`. Written by tools/openstack/pin.sh."
  echo "module cloud-provider-harness/tools/openstack/v1.$minor"
  echo
  echo "go 1.26.0"
  echo
  echo "// From $module $version's own go.mod."
  sed -n '/^replace (/,/^)/p' "$upstream"
} >"$dir/go.mod"
rm -f "$dir/go.sum"
cd "$dir"
go get -tool "$module/cmd/openstack-cloud-controller-manager@$version"
go mod tidy
echo "pinned cloud-provider-openstack $version in $dir"
