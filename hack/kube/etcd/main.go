// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command etcd is etcd's own server (etcdmain, what the etcd binary runs), at
// the version k8s.io/kubernetes v1.37.2 is built against: the apiserver e2e
// runs it on loopback, and the kind node image packs it as kubeadm's etcd
// image. The package is already in kube-apiserver's module graph, so no
// other download is needed.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
