// Command etcd is upstream etcd's server, built from the Go module proxy.
// etcd's own root module carries replace directives, so it cannot be installed
// with `go install`; this wrapper calls the same entry point its main package does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
