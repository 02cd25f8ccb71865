// govmomi v0.46.3's vcsim and govc, as built by `harness toolchain install`. Written by tools/vsphere/pin.sh.
module cloud-provider-harness/tools/vsphere/govmomi

go 1.26.0

tool (
	github.com/vmware/govmomi/govc
	github.com/vmware/govmomi/vcsim
)

require (
	github.com/a8m/tree v0.0.0-20210115125333-10a5fd5b637d // indirect
	github.com/dougm/pretty v0.0.0-20171025230240-2ee9d7453c02 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	github.com/vmware/govmomi v0.46.3 // indirect
	github.com/xlab/treeprint v1.2.0 // indirect
	golang.org/x/text v0.19.0 // indirect
)
