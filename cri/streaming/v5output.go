// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"io"

	"github.com/kubestream/kubestream/internal/wire"
)

// outWriter is the process's stdout or stderr: each Write becomes v5
// messages of at most size bytes (wire.Conn.WriteChannel), holding no
// buffer between writes. It is an io.ReaderFrom, so a runtime that copies
// a process's output with io.Copy from a FIFO (containerd does) has it
// moved to the client in the kernel (wire.Conn.ReadFromChannel).
type outWriter struct {
	wc   *wire.Conn
	ch   byte
	size int
	m    *Metrics
}

var (
	_ io.WriteCloser = (*outWriter)(nil)
	_ io.ReaderFrom  = (*outWriter)(nil)
)

// ReadFrom sends src's bytes until its EOF.
func (o *outWriter) ReadFrom(src io.Reader) (int64, error) {
	n, kernel, err := o.wc.ReadFromChannel(o.ch, src, o.size)
	o.m.output(n, kernel)
	return n, err
}

func (o *outWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := min(len(p), o.size)
		if err := o.wc.WriteChannel(o.ch, p[:k]); err != nil {
			o.m.output(int64(written), false)
			return written, err
		}
		p, written = p[k:], written+k
	}
	o.m.output(int64(written), false)
	return written, nil
}

// Close is a no-op: v5 ends output with the status, after the runtime's
// call returned.
func (o *outWriter) Close() error { return nil }
