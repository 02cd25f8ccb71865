module cloud-provider-harness/tools/kube/wget

go 1.26.0
