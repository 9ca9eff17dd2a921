// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command coredns is CoreDNS v1.14.6 (the version kubeadm v1.37.2 deploys)
// with the plugins kubeadm's Corefile names and no others, built here for
// the kind node image because no registry is reachable. This is CoreDNS's
// own way to build a custom server (its plugin.cfg, trimmed): the plugins
// register themselves when imported, and coremain runs the server.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
