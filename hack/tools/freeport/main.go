// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command freeport prints a free TCP port on 127.0.0.1, for scripts that
// must hand a port to a daemon's config (fresh machines may lack python).
package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer l.Close()
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
}
