#!/usr/bin/env bash
# Makes three commits on top of a checkout tools/kube/checkout-fixture.sh assembled, the way real
# kubernetes/kubernetes changes land, for the end-to-end proof of `--kubernetes-source` (a matrix
# over commits, the LKG's culprit, `harness bisect --side kubernetes`):
#
#   tools/kube/fixture-commits.sh DIR
#
#   1. kubelet: a log message says more                (harmless: every provider still passes)
#   2. kubelet: the cloud taint only with --register-with-taints
#                                                      (breaks every provider at run time: nodes
#                                                      register without node.cloudprovider.kubernetes.io/uninitialized,
#                                                      so no CCM initializes them: no providerID, no zone labels)
#   3. cloud-provider: DefaultInitFuncConstructors renamed, in-tree callers updated
#                                                      (breaks the compile of every out-of-tree CCM that uses it)
#
# The commits are deterministic (fixed author, dates and parents): the same fixture gets the same
# commit ids, so a toolchain built for one is found in the cache next time. It prints one line per
# commit: `<commit> <subject>`, oldest first.
set -euo pipefail

die() { printf 'error: %s\n' "$*" >&2; exit 1; }

dir="${1:-}"
[[ -n "$dir" && -d "$dir/.git" ]] || die "usage: $0 DIR: DIR is a checkout tools/kube/checkout-fixture.sh made"
cd "$dir"
git describe --tags --exact-match --match='v*-fixture.0' HEAD >/dev/null 2>&1 \
  || die "$dir's HEAD is not the fixture's tagged commit (v*-fixture.0): make a fresh one with tools/kube/checkout-fixture.sh"
[[ -z "$(git status --porcelain)" ]] || die "$dir has uncommitted changes: make a fresh one with tools/kube/checkout-fixture.sh"

day=1
commit() {
  local subject="$1"
  day=$((day + 1))
  local when
  when="$(printf '2026-01-%02dT00:00:00Z' "$day")"
  git add -A
  GIT_COMMITTER_DATE="$when" GIT_AUTHOR_DATE="$when" \
    git -c user.name=fixture -c user.email=fixture@localhost commit -q -m "$subject"
  printf '%s %s\n' "$(git rev-parse HEAD)" "$subject"
}

replace() { # FILE PERL-EXPRESSION: a change that must apply
  local file="$1" expression="$2" before
  before="$(sha256sum "$file")"
  perl -0pi -e "$expression" "$file"
  [[ "$(sha256sum "$file")" != "$before" ]] || die "$file did not change ($expression): the fixture's Kubernetes is not the one this script knows"
}

node_status=pkg/kubelet/kubelet_node_status.go
replace "$node_status" 's/"Attempting to register node"/"Attempting to register node with the API server"/'
commit "kubelet: say where the node registers"

replace "$node_status" 's/\tif kl\.externalCloudProvider \{\n\t\ttaint := /\tif kl.externalCloudProvider && len(kl.registerWithTaints) > 0 {\n\t\ttaint := /'
commit "kubelet: add the cloud provider's taint with the other registration taints"

mapfile -t callers < <(git grep -l -w DefaultInitFuncConstructors -- '*.go')
[[ ${#callers[@]} -gt 0 ]] || die "nothing uses DefaultInitFuncConstructors: the fixture's Kubernetes is not the one this script knows"
for file in "${callers[@]}"; do
  replace "$file" 's/\bDefaultInitFuncConstructors\b/DefaultControllerInitFuncConstructors/g'
done
commit "cloud-provider: rename DefaultInitFuncConstructors to DefaultControllerInitFuncConstructors"
