#!/usr/bin/env bash
# Pins what the `vsphere` provider runs: writes tools/vsphere/vMAJOR.MINOR/{go.mod,go.sum} (the CCM)
# and, with --govmomi, tools/vsphere/govmomi/{go.mod,go.sum} (vcsim and govc).
#
#   tools/vsphere/pin.sh v1.36.0            # cloud-provider-vsphere's CCM at a release tag
#   tools/vsphere/pin.sh --govmomi v0.46.3  # vcsim and govc at a govmomi tag
#
# The CCM: a wrapper module requiring k8s.io/cloud-provider-vsphere at the tag, with the CCM's main
# package as its `tool`, carrying the module's own `replace` (of vm-operator's testlabels package)
# without which it does not resolve; `go install k8s.io/cloud-provider-vsphere/...@vX` refuses a
# module with a replace. `harness toolchain install` builds cmd/vsphere-cloud-controller-manager
# from it, unmodified. The folder is named after the CCM's minor; a Kubernetes minor with no pin of
# its own runs the newest older one (the skew policy allows a CCM one minor behind).
#
# vcsim and govc: govmomi's own simulator and CLI, unmodified. From v0.47.0 on they are nested
# modules without tags, which the Go module proxy does not serve, so they stay at the last govmomi
# release that has both in its root module (v0.46.3) in a module of their own.
set -euo pipefail
export GOTOOLCHAIN=local GOFLAGS=
here="$(cd "$(dirname "$0")" && pwd)"

if [[ ${1:-} == --govmomi ]]; then
  version=${2:?usage: tools/vsphere/pin.sh --govmomi vX.Y.Z}
  dir="$here/govmomi"
  mkdir -p "$dir"
  {
    echo "// govmomi $version's vcsim and govc, as built by \`harness toolchain install\`. Written by tools/vsphere/pin.sh."
    echo "module cloud-provider-harness/tools/vsphere/govmomi"
    echo
    echo "go 1.26.0"
  } >"$dir/go.mod"
  rm -f "$dir/go.sum"
  cd "$dir"
  go get -tool "github.com/vmware/govmomi/vcsim@$version" "github.com/vmware/govmomi/govc@$version"
  go mod tidy
  echo "pinned govmomi $version (vcsim, govc) in $dir"
  exit 0
fi

version=${1:?usage: tools/vsphere/pin.sh vMAJOR.MINOR.PATCH}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "pin.sh: '$version' is not a release tag like v1.36.0" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
dir="$here/v1.$minor"
proxy=${GOPROXY:-https://proxy.golang.org}
proxy=${proxy%%,*}
upstream_mod=$(curl -fsS "$proxy/k8s.io/cloud-provider-vsphere/@v/$version.mod")
mkdir -p "$dir"
{
  echo "// cloud-provider-vsphere $version, as built by \`harness toolchain install\`. Written by tools/vsphere/pin.sh."
  echo "module cloud-provider-harness/tools/vsphere/v1.$minor"
  echo
  echo "go 1.26.0"
  echo
  echo "// The replaces of k8s.io/cloud-provider-vsphere's own go.mod at $version."
  grep -E '^replace ' <<<"$upstream_mod" || true
} >"$dir/go.mod"
rm -f "$dir/go.sum"
cd "$dir"
go get -tool "k8s.io/cloud-provider-vsphere/cmd/vsphere-cloud-controller-manager@$version"
go mod tidy
echo "pinned cloud-provider-vsphere $version in $dir"
