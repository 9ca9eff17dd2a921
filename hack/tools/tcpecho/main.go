// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command tcpecho echoes every TCP connection to its listening port, many
// at once (busybox's nc serves one at a time): the port-forward target in
// the kind cluster's test pods (hack/kind.sh, e2e/kind_test.go).
//
//	tcpecho -listen :8080
package main

import (
	"flag"
	"io"
	"log"
	"net"
)

func main() {
	addr := flag.String("listen", ":8080", "address to listen on")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c) // bounded: io.Copy's own 32 KiB buffer
		}()
	}
}
