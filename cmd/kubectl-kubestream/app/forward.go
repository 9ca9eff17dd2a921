// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/kubestream/kubestream/portmux"
)

// Options is one port-forward session as the user asked for it.
type Options struct {
	Pod     string
	Reverse bool // else UDP
	// Mappings: REMOTE:LOCAL for reverse, LOCAL:REMOTE for UDP (kubectl
	// port-forward's order: the side traffic starts from comes first).
	Mappings []string
	// Address: the local address reverse connections are dialled on, and
	// UDP's local socket is bound to.
	Address string
	Out     io.Writer
	// Ready, when set, gets each pod port once the node serves it.
	Ready chan<- uint16
}

// Mapping is one parsed pair of ports.
type Mapping struct{ Remote, Local uint16 }

// Protocol is the session's subprotocol.
func (o Options) Protocol() string {
	if o.Reverse {
		return portmux.ReverseProtocol
	}
	return portmux.UDPProtocol
}

// Mode names the mode in messages.
func (o Options) Mode() string {
	if o.Reverse {
		return "reverse port-forward"
	}
	return "UDP port-forward"
}

// Parse reads the mappings; a single port means the same port both sides.
func (o Options) Parse() ([]Mapping, error) {
	if len(o.Mappings) == 0 {
		return nil, fmt.Errorf("at least one port mapping is required")
	}
	var ms []Mapping
	for _, s := range o.Mappings {
		a, b, found := strings.Cut(s, ":")
		if !found {
			b = a
		}
		first, err1 := strconv.ParseUint(a, 10, 16)
		second, err2 := strconv.ParseUint(b, 10, 16)
		if err1 != nil || err2 != nil || first == 0 || second == 0 {
			return nil, fmt.Errorf("invalid port mapping %q: want PORT or PORT:PORT, ports 1-65535", s)
		}
		m := Mapping{Remote: uint16(first), Local: uint16(second)}
		if !o.Reverse {
			m = Mapping{Local: uint16(first), Remote: uint16(second)}
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// Query adds the pod ports as the apiserver's "ports" (base: the
// pods/portforward URL) or the kubelet's "port" parameter.
func Query(base *url.URL, param string, ms []Mapping) *url.URL {
	u := *base
	q := u.Query()
	for _, m := range ms {
		q.Add(param, strconv.Itoa(int(m.Remote)))
	}
	u.RawQuery = q.Encode()
	return &u
}

// Run dials u (a pods/portforward or kubelet /portForward URL already
// carrying the ports) and runs the session until ctx ends (nil), the node
// ends it, or the connection is lost.
func Run(ctx context.Context, cfg *rest.Config, u *url.URL, o Options) error {
	ms, err := o.Parse()
	if err != nil {
		return err
	}
	host := o.Address
	if host == "" {
		host = "127.0.0.1"
	}
	cc := portmux.ClientConfig{Pod: o.Pod, Out: o.Out, Ready: o.Ready}
	for _, m := range ms {
		if o.Reverse {
			cc.Reverse = append(cc.Reverse, portmux.ReverseForward{Remote: m.Remote, Local: net.JoinHostPort(host, strconv.Itoa(int(m.Local)))})
			continue
		}
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(host), Port: int(m.Local)})
		if err != nil {
			closeUDP(cc.UDP)
			return fmt.Errorf("local UDP port %d: %w", m.Local, err)
		}
		cc.UDP = append(cc.UDP, portmux.UDPForward{Remote: m.Remote, Conn: c})
	}
	ws, err := Dial(ctx, cfg, u, o.Protocol())
	if err != nil {
		closeUDP(cc.UDP)
		return err
	}
	return portmux.ServeClient(ctx, ws, cc)
}

func closeUDP(fs []portmux.UDPForward) {
	for _, f := range fs {
		_ = f.Conn.Close() // done with it: a failed close changes nothing
	}
}
