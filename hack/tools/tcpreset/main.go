// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command tcpreset is a pod-side TCP server that resets a connection on
// request: a first line "reset" is answered with RST (SO_LINGER 0 on
// close), anything else is echoed. The kind cluster's test pods run it
// behind port-forward (e2e/kind_test.go): one reset connection must end
// that connection alone, not the user's whole `kubectl port-forward`.
//
//	tcpreset -listen :9000
package main

import (
	"flag"
	"log"
	"net"

	"github.com/kubestream/kubestream/internal/wiretest"
)

func main() {
	addr := flag.String("listen", ":9000", "address to listen on")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(wiretest.ServeResets(l))
}
