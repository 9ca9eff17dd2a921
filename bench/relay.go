// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// relay is a TCP hop with no translation: direct SPDY from client-go to the
// runtime, but through a process that reads every byte into user space and
// writes it on, with the same 32 KiB buffers a translator uses. Any design
// that puts a translator process between client and runtime pays at least
// this (two more kernel copies, one more wake-up per message), so relay ÷
// direct is the ceiling for a translator on the machine at hand.
//
// The copy loop is written out rather than io.Copy'd on purpose: between two
// TCP connections io.Copy splices in the kernel, which a translator (whose
// bytes change in flight, and whose kubelet leg is TLS) never can.
type relay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

func startRelay(target string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.carry(c)
		}()
	}
}

func (r *relay) track(c net.Conn, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		r.conns[c] = struct{}{}
	} else {
		delete(r.conns, c)
	}
}

// carry copies both ways until both directions ended, passing each
// half-close on, as a kernel-level proxy would.
func (r *relay) carry(client net.Conn) {
	defer client.Close()
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer up.Close()
	r.track(client, true)
	defer r.track(client, false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pump(up, client)
	}()
	pump(client, up)
	<-done
}

func pump(dst, src net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
					return
				}
			}
			_ = dst.Close()
			return
		}
	}
}

func (r *relay) stop() {
	_ = r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// loopbackMBps is the physical ceiling here: size bytes over one loopback
// TCP connection between two goroutines, 32 KiB writes and reads, nothing
// else.
func loopbackMBps(size int64) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 32*1024)
		var n int64
		for n < size {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, 32*1024)
	start := time.Now()
	for n := int64(0); n < size; n += int64(len(buf)) {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	if err := <-got; err != nil {
		return 0, err
	}
	return mbps(size, time.Since(start)), nil
}
