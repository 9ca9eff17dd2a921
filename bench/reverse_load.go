// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The load of the reverse group (reverse.go): the services a connection
// reaches, in this process, and what the opener of a connection does. The
// same services and the same openers serve forward and reverse; only the
// addresses differ, so the two figures differ by the session alone.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// echoRequest is the short connection's request: small enough that the
// connection's setup and teardown are the whole of its cost.
const echoRequest = 64

// ioDeadline bounds every connection, so a lost one fails the run instead
// of hanging it.
const ioDeadline = 2 * time.Minute

// services are TCP servers on 127.0.0.1: an echo, a sink and a source.
// Sink and source read the transfer's length first, so no figure depends
// on a half-close travelling through the session.
type services struct {
	echo, sink, source net.Listener
}

func startServices() (*services, error) {
	s := &services{}
	for _, l := range []*net.Listener{&s.echo, &s.sink, &s.source} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.close()
			return nil, err
		}
		*l = ln
	}
	go serveTCP(s.echo, func(c net.Conn) { _, _ = io.CopyBuffer(c, c, make([]byte, 32<<10)) })
	go serveTCP(s.sink, func(c net.Conn) {
		var n int64
		if binary.Read(c, binary.BigEndian, &n) != nil {
			return
		}
		if k, _ := io.CopyBuffer(io.Discard, io.LimitReader(c, n), make([]byte, 32<<10)); k == n {
			_, _ = c.Write([]byte{1}) // the opener's clock stops here
		}
	})
	go serveTCP(s.source, func(c net.Conn) {
		var n int64
		if binary.Read(c, binary.BigEndian, &n) == nil {
			_, _ = io.CopyBuffer(c, io.LimitReader(zeros{}, n), make([]byte, 32<<10))
		}
	})
	return s, nil
}

func (s *services) close() {
	for _, l := range []net.Listener{s.echo, s.sink, s.source} {
		if l != nil {
			l.Close()
		}
	}
}

func port(l net.Listener) uint16 { return uint16(l.Addr().(*net.TCPAddr).Port) }

func serveTCP(l net.Listener, handle func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(ioDeadline))
			handle(c)
		}()
	}
}

// echoOnce is one short connection: open, one request and its echo, close.
func echoOnce(addr string) error {
	c, err := net.DialTimeout("tcp", addr, ioDeadline)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioDeadline))
	req, got := make([]byte, echoRequest), make([]byte, echoRequest)
	if _, err := c.Write(req); err != nil {
		return err
	}
	_, err = io.ReadFull(c, got)
	return err
}

// connRate opens n short connections to addr, k at a time; connections
// per second.
func connRate(addr string, n, k int) (float64, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, k)
	start := time.Now()
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := echoOnce(addr); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return 0, err
	}
	return float64(n) / d.Seconds(), nil
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// transferEnd is where one direction's connection is opened and whether
// its opener sends (to the sink) or receives (from the source).
type transferEnd struct {
	addr string
	send bool
}

// transfer moves size bytes over one connection; the time runs from the
// dial to the last byte's arrival.
func transfer(e transferEnd, size int64) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", e.addr, ioDeadline)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * ioDeadline))
	if err := binary.Write(c, binary.BigEndian, size); err != nil {
		return 0, err
	}
	buf := make([]byte, 32<<10)
	if e.send {
		if _, err := io.CopyBuffer(c, io.LimitReader(zeros{}, size), buf); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, buf[:1]); err != nil {
			return 0, fmt.Errorf("the sink's acknowledgement: %w", err)
		}
		return time.Since(start), nil
	}
	n, err := io.CopyBuffer(io.Discard, io.LimitReader(c, size), buf)
	if n != size {
		return 0, fmt.Errorf("received %d of %d bytes: %v", n, size, err)
	}
	return time.Since(start), nil
}

// udpEcho answers every datagram with itself, as a pod's UDP service.
func udpEcho() (*net.UDPConn, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	go func() {
		buf := make([]byte, 1<<16)
		for {
			k, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteToUDP(buf[:k], from)
		}
	}()
	return c, nil
}

// udpResult is one run of udpRate.
type udpResult struct {
	perSec, mbps float64
	sent, lost   int
}

// udpRate sends n datagrams of size bytes from a new peer (so a new
// association) to local and counts those that come back. At most a
// window's worth are in flight, so the figure is what the session carries
// rather than what the sockets' buffers drop; a datagram not back in time
// is taken as lost and its slot reused.
func udpRate(local *net.UDPAddr, size, n int) (udpResult, error) {
	peer, err := net.DialUDP("udp", nil, local)
	if err != nil {
		return udpResult{}, err
	}
	defer peer.Close()
	window := max(1, min(64, (128<<10)/size)) // in flight: what default socket buffers hold
	credit := make(chan struct{}, window)
	for range window {
		credit <- struct{}{}
	}
	var got, lastAt atomic.Int64
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 1<<16)
		for {
			if _, err := peer.Read(buf); err != nil {
				return
			}
			got.Add(1)
			lastAt.Store(time.Now().UnixNano())
			select {
			case credit <- struct{}{}:
			default: // a late one whose slot was already reused
			}
		}
	}()
	msg := make([]byte, size)
	start := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for range n {
		timer.Reset(100 * time.Millisecond)
		select {
		case <-credit:
		case <-timer.C:
		}
		if _, err := peer.Write(msg); err != nil {
			return udpResult{}, err
		}
	}
	for prev := int64(-1); got.Load() < int64(n) && got.Load() != prev; {
		prev = got.Load()
		time.Sleep(500 * time.Millisecond) // the last of them still on the way
	}
	_ = peer.SetReadDeadline(time.Now())
	<-read
	k := got.Load()
	if k == 0 {
		return udpResult{}, errors.New("no datagram came back")
	}
	d := time.Duration(lastAt.Load() - start.UnixNano())
	return udpResult{perSec: float64(k) / d.Seconds(), mbps: float64(k) * float64(size) / 1e6 / d.Seconds(),
		sent: n, lost: n - int(k)}, nil
}
