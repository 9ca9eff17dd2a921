// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package frontdoor serves a node's whole kubelet API in front of a
// kubelet nobody rebuilt: the streaming paths (/exec, /attach,
// /portForward) go to kubestream's own server, as in a patched kubelet, and
// every other path is passed to the local kubelet unchanged, streamed as
// the kubelet writes it.
//
// Nothing reaches the kubelet that the kubelet would have refused: every
// request is authenticated and authorized here first, as the kubelet does
// it (Attributes is its mapping of paths to subresources of nodes), and
// only then sent on with kubestream's own credential (KubeletTransport).
// The kubelet still authorizes that credential; the caller's own never
// reaches it.
//
// Goroutines: none of its own. Each request is served on the http.Server's
// goroutine that read it; httputil.ReverseProxy copies a passed-through
// response on that goroutine, bounded by its 32 KiB buffer.
//
// Reading order: frontdoor.go (Config, Handler, the routing switch and
// the guard), attributes.go (the kubelet's path mapping), kubelet.go (the
// credential and TLS that reach the kubelet). Nothing runs back up.
//
// Who imports it: kubestream node (cmd/kubestream/app). It uses server for
// the kubelet's verbs, the Authorizer interface, and Authenticate and
// Authorize (the kubelet's authentication and authorization, shared with
// kubestream serve's guard), nothing else.
package frontdoor
