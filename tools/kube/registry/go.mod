module cloud-provider-harness/tools/kube/registry

go 1.26.0
