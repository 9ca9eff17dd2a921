// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// -only reverse: kubestream's reverse port-forward beside forward
// port-forward, on one node, in one run, and UDP port-forward alone.
//
//	node      kubestream serve on the embedded reference runtime, in its
//	          own process (-role serve), so its CPU is its own; a pod's
//	          network there is this host's loopback
//	forward   client-go's PortForwarder (kubectl port-forward's code) over
//	          its WebSocket tunnel dialer: one session, each connection to
//	          its local listener a pair of streams to the pod's port
//	reverse   the plugin's client (kubectl-kubestream/app): one session,
//	          each connection to the pod's listener dialled to a local port
//	UDP       the plugin's client end (portmux) of one UDP session
//
// Services and openers are the same for both (reverse_load.go): an opener
// on the client's side for forward, in the pod for reverse.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"

	pfapp "github.com/kubestream/kubestream/cmd/kubectl-kubestream/app"
	serveapp "github.com/kubestream/kubestream/cmd/kubestream/app"
	"github.com/kubestream/kubestream/portmux"
)

// concurrentConns is the "at once" figure's openers: well under the
// node's default cap of connections per reverse session, with room for
// those still closing.
const concurrentConns = 16

// runServe is -role serve: kubestream serve on the reference runtime,
// plain HTTP on loopback, with both port-forward modes on (they are off by
// default; the reference runtime's pods share the host's network).
func runServe() error {
	so := serveapp.NewServeOptions()
	so.Address, so.Port, so.InsecureDevelopmentHTTP = "127.0.0.1", 0, true
	so.PortForwardModes.Reverse, so.PortForwardModes.UDP = "on", "on"
	so.PortForwardModes.AllowHostNetwork = true
	run, err := serveapp.Start(context.Background(), so)
	if err != nil {
		return err
	}
	fmt.Println("READY", run.URL)
	waitSignal()
	run.Stop()
	return nil
}

// endpoints are where a path's openers connect.
type endpoints struct {
	echo     string
	down, up transferEnd // pod → client, client → pod
}

// startForward runs client-go's port-forward of the services' ports until
// ctx ends.
func startForward(ctx context.Context, node string, s *services, wg *sync.WaitGroup) (endpoints, error) {
	u, _ := url.Parse(node + "/portForward/default/demo")
	d, err := portforward.NewSPDYOverWebsocketDialer(u, &rest.Config{Host: node})
	if err != nil {
		return endpoints{}, err
	}
	ready := make(chan struct{})
	ports := []string{fmt.Sprintf("0:%d", port(s.echo)), fmt.Sprintf("0:%d", port(s.sink)), fmt.Sprintf("0:%d", port(s.source))}
	pf, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, ports, ctx.Done(), ready, io.Discard, io.Discard)
	if err != nil {
		return endpoints{}, err
	}
	failed := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); failed <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return endpoints{}, fmt.Errorf("forward port-forward: %v", err)
	}
	fp, err := pf.GetPorts()
	if err != nil {
		return endpoints{}, err
	}
	local := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", fp[i].Local) }
	return endpoints{echo: local(0), down: transferEnd{local(2), false}, up: transferEnd{local(1), true}}, nil
}

// freePort is a loopback TCP port nothing listens on (the pod's network
// is this host's).
func freePort() (uint16, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return port(l), nil
}

// startReverse runs the plugin's reverse session for the services' ports
// until ctx ends.
func startReverse(ctx context.Context, node string, s *services, wg *sync.WaitGroup) (endpoints, error) {
	q, mappings := url.Values{}, []string{}
	var pod [3]uint16
	for i, l := range []net.Listener{s.echo, s.sink, s.source} {
		p, err := freePort()
		if err != nil {
			return endpoints{}, err
		}
		pod[i] = p
		q.Add("port", fmt.Sprint(p))
		mappings = append(mappings, fmt.Sprintf("%d:%d", p, port(l)))
	}
	u, _ := url.Parse(node + "/portForward/default/demo?" + q.Encode())
	ready := make(chan uint16, len(pod))
	o := pfapp.Options{Pod: "demo", Reverse: true, Mappings: mappings, Ready: ready}
	ended := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); ended <- pfapp.Run(ctx, &rest.Config{Host: node}, u, o) }()
	for range pod {
		select {
		case <-ready:
		case err := <-ended:
			return endpoints{}, fmt.Errorf("reverse port-forward: %v", err)
		}
	}
	at := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", pod[i]) }
	return endpoints{echo: at(0), down: transferEnd{at(1), true}, up: transferEnd{at(2), false}}, nil
}

// startUDP runs one UDP session to the pod's echo; datagrams sent to the
// returned address go through it.
func startUDP(ctx context.Context, node string, echo *net.UDPConn, wg *sync.WaitGroup) (*net.UDPAddr, error) {
	remote := uint16(echo.LocalAddr().(*net.UDPAddr).Port)
	local, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(fmt.Sprintf("%s/portForward/default/demo?port=%d", node, remote))
	ws, err := pfapp.Dial(ctx, &rest.Config{Host: node}, u, portmux.UDPProtocol)
	if err != nil {
		local.Close()
		return nil, err
	}
	ready := make(chan uint16, 1)
	addr := local.LocalAddr().(*net.UDPAddr)
	cfg := portmux.ClientConfig{Pod: "demo", UDP: []portmux.UDPForward{{Remote: remote, Conn: local}}, Ready: ready}
	ended := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); ended <- portmux.ServeClient(ctx, ws, cfg) }()
	select {
	case <-ready:
		return addr, nil
	case err := <-ended:
		return nil, fmt.Errorf("UDP port-forward: %v", err)
	}
}

// orchestrateReverse measures forward and reverse alternately, o.reps
// times, then UDP, and writes the tables.
func orchestrateReverse(o options) error {
	svc, err := startServices()
	if err != nil {
		return err
	}
	defer svc.close()
	node, err := startChild("-role", "serve")
	if err != nil {
		return err
	}
	defer node.stop()
	echo, err := udpEcho()
	if err != nil {
		return err
	}
	defer echo.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var sessions sync.WaitGroup
	defer sessions.Wait() // every client end gone before the node stops
	defer cancel()
	fwd, err := startForward(ctx, node.value, svc, &sessions)
	if err != nil {
		return err
	}
	rev, err := startReverse(ctx, node.value, svc, &sessions)
	if err != nil {
		return err
	}
	f := newModeFigs(o)
	for rep := 1; rep <= o.reps; rep++ {
		for _, p := range []struct {
			name string
			e    endpoints
		}{{"forward", fwd}, {"reverse", rev}} {
			if err := f.measure(p.name, p.e, node); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			f.log(rep, p.name)
		}
	}
	local, err := startUDP(ctx, node.value, echo, &sessions)
	if err != nil {
		return err
	}
	if err := f.measureUDP(local); err != nil {
		return fmt.Errorf("UDP: %w", err)
	}
	return f.write(o)
}

func (f *modeFigs) log(rep int, name string) {
	fmt.Fprintf(os.Stderr, "rep %d %-8s %6.0f conn/s sequential %6.0f conn/s %d at once, %6.0f MB/s pod→client %6.0f MB/s client→pod\n",
		rep, name, last(f.seq[name]), last(f.par[name]), concurrentConns, last(f.down[name]), last(f.up[name]))
}
