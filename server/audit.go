// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
)

// correlationHeaders are what may tie a node's record to the apiserver's
// event and to the person at the keyboard, as far as they reach the node.
var correlationHeaders = []string{"Audit-Id", "Kubectl-Session", "Kubectl-Command", "X-Forwarded-For"}

func uidOf(r *http.Request) types.UID { return types.UID(r.PathValue("uid")) }

func userInfo(u user.Info) authnv1.UserInfo {
	ui := authnv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		ui.Extra = map[string]authnv1.ExtraValue{}
		for k, v := range extra {
			ui.Extra[k] = v
		}
	}
	return ui
}

// subresourceOf is the streaming subresource a request's path names.
func subresourceOf(path string) string {
	switch {
	case strings.HasPrefix(path, "/exec/"):
		return Exec
	case strings.HasPrefix(path, "/attach/"):
		return Attach
	case strings.HasPrefix(path, "/portForward/"):
		return PortForward
	}
	return ""
}

func httpStatus(code int, msg string) *metav1.Status {
	st := &metav1.Status{Code: int32(code), Message: msg, Status: metav1.StatusFailure, Reason: metav1.StatusReason(http.StatusText(code))}
	if code < 400 {
		st.Status, st.Reason = metav1.StatusSuccess, ""
	}
	return st
}

// endedBy reads who ended a session from its status: the runtime's (the
// command ended) or none (the client left first). The node's own ends are
// said by the carrier (translator.Result.NodeEnded).
func endedBy(st *metav1.Status) string {
	if st == nil {
		return "client"
	}
	return "runtime"
}
