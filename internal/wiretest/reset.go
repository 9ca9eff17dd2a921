// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wiretest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// ResetLine is the line that makes ServeResets reset a connection.
const ResetLine = "reset\n"

// ServeResets serves l until it closes: on each connection, a first line
// of ResetLine is answered with a reset (SO_LINGER 0 on close, as
// PostgreSQL, TLS servers and HTTP servers that answer before reading a
// large body end connections), anything else is echoed, that line and all
// after it. It is the pod-side server of the port-forward reset tests
// (hack/tools/tcpreset in the kind cluster's test image).
func ServeResets(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go serveReset(c)
	}
}

func serveReset(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return
	}
	if line == ResetLine {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // the close below sends RST, not FIN
		}
		return
	}
	if _, err := io.WriteString(c, line); err != nil {
		return
	}
	_, _ = io.Copy(c, br) // bounded: bufio's and io.Copy's buffers
}

// ResetServer starts ServeResets on a loopback port for the test's life
// and returns its address.
func ResetServer(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() { _ = ServeResets(l) }()
	return l.Addr().String()
}

// LineThrough sends line through a forwarded local port and returns the
// first line read back, or the error that ended the connection first.
func LineThrough(port uint16, line string) (string, error) {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // fails only once closed
	if _, err := io.WriteString(c, line); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}
