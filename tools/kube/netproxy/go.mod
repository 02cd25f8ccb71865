module cloud-provider-harness/tools/kube/netproxy

go 1.26.0
