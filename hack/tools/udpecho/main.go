// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command udpecho answers every UDP datagram on its port with the same
// bytes, one datagram for one: the UDP port-forward target in the kind
// cluster's test pods (hack/kind.sh, e2e/kind_modes_test.go).
//
//	udpecho -listen :7000
package main

import (
	"flag"
	"log"
	"net"
)

func main() {
	addr := flag.String("listen", ":7000", "address to listen on")
	flag.Parse()
	c, err := net.ListenPacket("udp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 64<<10) // the largest datagram UDP carries
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := c.WriteTo(buf[:n], from); err != nil {
			log.Print(err)
		}
	}
}
