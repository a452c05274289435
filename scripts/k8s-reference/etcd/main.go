// etcd, the storage behind the tests' kube-apiserver, at the server version Kubernetes v1.34 requires.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
