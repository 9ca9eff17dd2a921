// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"
)

func TestAttach(t *testing.T) {
	n := startNode(t)
	for _, protocol := range []string{"websocket", "spdy"} {
		t.Run(protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pr, pw := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan execResult, 1)
			go func() {
				done <- n.stream(ctx, n.execURL("attach", "echo", "echo", true, false),
					streamOpts{protocol: protocol, stdin: pr, stdout: outW})
				outW.Close()
			}()
			lines := bufio.NewScanner(outR)
			for i := 0; i < 3; i++ {
				msg := fmt.Sprintf("hello %s %d", protocol, i)
				if _, err := fmt.Fprintln(pw, msg); err != nil {
					t.Fatal(err)
				}
				if !lines.Scan() || lines.Text() != "echo: "+msg {
					t.Fatalf("attach read %q (%v), want %q", lines.Text(), lines.Err(), "echo: "+msg)
				}
			}
			go func() { _, _ = io.Copy(io.Discard, outR) }()
			detach(t, pw, done)
		})
	}
	n.waitIdle(10 * time.Second)
}

// detach closes the attached client's stdin, which must end the attach
// cleanly (not the container) within a bound.
func detach(t *testing.T, stdin io.Closer, done <-chan execResult) {
	t.Helper()
	stdin.Close()
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatal(res.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("attach did not end after stdin closed")
	}
}

// TestPortForward: both dialers, several ports on one forward, concurrent
// connections, and large transfers byte for byte both ways.
func TestPortForward(t *testing.T) {
	n := startNode(t)
	p1, p2 := tcpEcho(t), tcpEcho(t)
	size := envInt("KUBESTREAM_PF_MB", 32) << 20
	for _, protocol := range []string{"websocket", "spdy"} {
		t.Run(protocol, func(t *testing.T) {
			local, stop := openForward(t, n, protocol, "demo", p1, p2)
			defer stop()
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := 0; i < 8; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- echoCheck(local[i%2], []byte(strings.Repeat(fmt.Sprintf("conn %d ", i), 1000)))
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := bulkEcho(local[0], size); err != nil {
				t.Fatal(err)
			}
		})
	}
	n.waitIdle(15 * time.Second)
}

func echoCheck(port uint16, payload []byte) error {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	go func() { _, _ = c.Write(payload) }()
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("port %d: %w", port, err)
	}
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("port %d: echo differs", port)
	}
	return nil
}

// bulkEcho sends size random bytes through the echo and compares checksums.
func bulkEcho(port uint16, size int) error {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	in, out := sha256.New(), sha256.New()
	werr := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, io.TeeReader(io.LimitReader(rand.New(rand.NewSource(2)), int64(size)), in))
		werr <- err
	}()
	n, err := io.Copy(out, io.LimitReader(c, int64(size)))
	if err != nil {
		return err
	}
	if err := <-werr; err != nil {
		return err
	}
	if int(n) != size || !bytes.Equal(in.Sum(nil), out.Sum(nil)) {
		return fmt.Errorf("bulk echo: %d of %d bytes, checksums equal %v", n, size, bytes.Equal(in.Sum(nil), out.Sum(nil)))
	}
	return nil
}

// TestAttachTerminalMismatch: a client whose tty parameter does not match
// the container. A kubelet takes the container's from the pod spec;
// standalone kubestream has no pod spec and passes the client's on, and the
// runtimes (the reference runtime, containerd 2.4 and 1.6 under the
// containerd tag) still join the client to the process: no terminal asked
// of a terminal container reaches its shell, and a terminal asked of a
// plain one, with resizes as kubectl sends them, talks to it.
func TestAttachTerminalMismatch(t *testing.T) {
	n := startNode(t)
	cases := []struct {
		name, pod, container string
		tty                  bool
		send, want           string
	}{
		{"no tty to a terminal", "term", "shell", false, "echo attached-$((20+1))\n", "attached-21"},
		{"tty to a plain container", "echo", "echo", true, "plain\n", "echo: plain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pr, pw := io.Pipe()
			out := &syncBuffer{}
			o := streamOpts{protocol: "websocket", stdin: pr, stdout: out, tty: tc.tty}
			if tc.tty {
				q := make(sizeQueue, 1)
				q <- &remotecommand.TerminalSize{Width: 100, Height: 30}
				o.sizes = q
				defer close(q)
			}
			done := make(chan execResult, 1)
			go func() { done <- n.stream(ctx, n.execURL("attach", tc.pod, tc.container, true, tc.tty), o) }()
			if _, err := io.WriteString(pw, tc.send); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(out.String(), tc.want) {
				select {
				case res := <-done:
					t.Fatalf("attach ended before %q arrived: %v; output %q", tc.want, res.err, out.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("no %q in the output %q", tc.want, out.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			detach(t, pw, done)
		})
	}
	n.waitIdle(10 * time.Second)
}
