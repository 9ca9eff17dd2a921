// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pfDialer returns client-go's port-forward dialer for the path.
func (p *path) pfDialer(ctx context.Context) (httpstream.Dialer, error) {
	if p.base == "" {
		u, err := p.cri.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: benchSandbox})
		if err != nil {
			return nil, err
		}
		u = p.viaRelay(u)
		if p.v5 { // a runtime that serves the tunnel itself
			return portforward.NewSPDYOverWebsocketDialer(u, &rest.Config{Host: u.Scheme + "://" + u.Host})
		}
		tr, up, err := spdy.RoundTripperFor(&rest.Config{Host: u.Scheme + "://" + u.Host})
		if err != nil {
			return nil, err
		}
		return spdy.NewDialer(up, &http.Client{Transport: tr}, http.MethodPost, u), nil
	}
	u, _ := url.Parse(p.base + "/portForward/default/bench")
	return portforward.NewSPDYOverWebsocketDialer(u, &rest.Config{Host: p.base})
}

// portForward moves size bytes down (port 1 emits) or up (port 2 sinks)
// over one forwarded connection, with the streams client-go's forwarder
// creates.
func (p *path) portForward(ctx context.Context, size int64, down bool) (time.Duration, error) {
	start := time.Now()
	d, err := p.pfDialer(ctx)
	if err != nil {
		return 0, err
	}
	conn, _, err := d.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	port := "2"
	if down {
		port = "1"
	}
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, port)
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		return 0, err
	}
	errStream.Close()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 32*1024)
	if down {
		n, err := io.CopyBuffer(io.Discard, data, buf)
		if err != nil || n != size {
			return 0, fmt.Errorf("port-forward down: %d of %d bytes: %v", n, size, err)
		}
	} else {
		if _, err := io.CopyBuffer(data, io.LimitReader(zeros{}, size), buf); err != nil {
			return 0, err
		}
		data.Close()
		// The backend closes its side once it has read everything.
		if _, err := io.Copy(io.Discard, data); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}
