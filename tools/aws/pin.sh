#!/usr/bin/env bash
# Pins cloud-provider-aws's CCM for the `aws` provider: writes tools/aws/vMAJOR.MINOR/{go.mod,go.sum}.
#
#   tools/aws/pin.sh v1.37.1
#
# A wrapper module requiring k8s.io/cloud-provider-aws at the release tag, with the CCM's main
# package as its `tool`: `harness toolchain install` builds
# k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager from it, unmodified. The wrapper is
# needed because the module's own go.mod has a replace directive
# (github.com/google/cel-go => github.com/cel-expr/cel-go, the same code under its new path), so
# `go install k8s.io/cloud-provider-aws/...@vX` refuses it; as a dependency its replace is ignored
# and cel-go comes from its original path at the same version. The folder is named after the
# Kubernetes minor the CCM release goes with (each cloud-provider-aws minor tracks one).
set -euo pipefail

version=${1:?usage: tools/aws/pin.sh vMAJOR.MINOR.PATCH}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "pin.sh: '$version' is not a release tag like v1.37.1" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
dir="$(cd "$(dirname "$0")" && pwd)/v1.$minor"
export GOTOOLCHAIN=local GOFLAGS=

mkdir -p "$dir"
{
  echo "// cloud-provider-aws $version, as built by \`harness toolchain install\`. Written by tools/aws/pin.sh."
  echo "module cloud-provider-harness/tools/aws/v1.$minor"
  echo
  echo "go 1.26.0"
} >"$dir/go.mod"
rm -f "$dir/go.sum"
cd "$dir"
go get -tool "k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager@$version"
go mod tidy
echo "pinned cloud-provider-aws $version in $dir"
