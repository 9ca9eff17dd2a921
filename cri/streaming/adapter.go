// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"context"
	"io"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/connreset"
)

// criAdapter is cri-streaming's own adapter from Runtime to its handlers'
// interfaces (it keeps its copy unexported), with two of this package's
// guarantees on the sessions cri-streaming serves (SPDY, legacy
// WebSocket): Stop ends their runtime calls as it ends the native ones, and
// a forwarded connection the pod resets ends alone.
type criAdapter struct{ s *backend }

func (a *criAdapter) ExecInContainer(ctx context.Context, _, _, container string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize, _ time.Duration) error {
	return a.call(ctx, func(ctx context.Context) error {
		return a.s.runtime.Exec(ctx, container, cmd, in, out, errw, tty, resize)
	})
}

func (a *criAdapter) AttachContainer(ctx context.Context, _, _, container string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error {
	return a.call(ctx, func(ctx context.Context) error {
		return a.s.runtime.Attach(ctx, container, in, out, errw, tty, resize)
	})
}

// PortForward resets the data stream of a connection the pod reset or
// broke and returns no error, so cri-streaming writes nothing on its error
// stream (connreset says why); every other failure is reported as before.
// Only a stream that can be reset on its own (SPDY's) is: on the legacy
// WebSocket protocol a port's channels are the session.
func (a *criAdapter) PortForward(ctx context.Context, pod, _ string, port int32, stream io.ReadWriteCloser) error {
	var err error
	// A forwarded connection is counted on its own: cri-streaming's
	// port-forward session has no end Stop could wait for.
	a.s.calls.run(func() {
		err = a.call(ctx, func(ctx context.Context) error {
			return a.s.runtime.PortForward(ctx, pod, port, stream)
		})
	})
	reset, ok := stream.(interface{ Reset() error })
	reason := connreset.Of(err)
	if reason == "" || !ok {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Port-forward connection broken by the pod", "pod", pod, "port", port, "reason", reason, "err", err)
	a.s.config.Metrics.connectionReset(reason)
	if rerr := reset.Reset(); rerr != nil {
		klog.FromContext(ctx).V(3).Info("Resetting a port-forward stream failed", "port", port, "err", rerr)
	}
	return nil
}

// call runs a runtime call for cri-streaming with a context that also ends
// when the server stops. Exec and attach sessions are counted by their
// handlers, until cri-streaming has written their status.
func (a *criAdapter) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.s.ctx, cancel)()
	return f(ctx)
}
