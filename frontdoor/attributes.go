// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package frontdoor

import (
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kubestream/kubestream/server"
)

// Attributes returns what a request for path must be authorized as, as
// the kubelet v1.37 decides it (KubeletFineGrainedAuthz, locked on since
// v1.36 and on by default since v1.33): resource nodes, name nodeName, the
// verb of the HTTP method and one subresource; for /pods, /runningpods,
// /healthz and /configz a fine-grained subresource first and proxy as the
// fallback. Any one allowed lets the request in.
func Attributes(nodeName string, u user.Info, r *http.Request) []authorizer.Attributes {
	path := r.URL.Path
	var subresources []string
	switch {
	case isSubpath(path, "/allocatedPods"), isSubpath(path, "/pods"), isSubpath(path, "/runningpods/"):
		subresources = append(subresources, "pods")
	case isSubpath(path, "/healthz"):
		subresources = append(subresources, "healthz")
	case isSubpath(path, "/configz"):
		subresources = append(subresources, "configz")
	}
	switch {
	case isSubpath(path, "/stats/"):
		subresources = append(subresources, "stats")
	case isSubpath(path, "/metrics"):
		subresources = append(subresources, "metrics")
	case isSubpath(path, "/logs/"):
		subresources = append(subresources, "log")
	case isSubpath(path, "/checkpoint/"):
		subresources = append(subresources, "checkpoint")
	case isSubpath(path, "/statusz"):
		subresources = append(subresources, "statusz")
	case isSubpath(path, "/flagz"):
		subresources = append(subresources, "configz")
	default:
		subresources = append(subresources, "proxy")
	}
	attrs := make([]authorizer.Attributes, 0, len(subresources))
	for _, sub := range subresources {
		attrs = append(attrs, authorizer.AttributesRecord{User: u, Verb: server.Verb(r.Method), APIVersion: "v1",
			Resource: "nodes", Subresource: sub, Name: nodeName, ResourceRequest: true, Path: path})
	}
	return attrs
}

// isSubpath is the kubelet's: sub is path, or below it.
func isSubpath(sub, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return sub == path || (strings.HasPrefix(sub, path) && sub[len(path)] == '/')
}
