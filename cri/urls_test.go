// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"net/url"
	"testing"
)

func TestResolveStreamURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://10.0.0.1:10010/exec/tok", "http://10.0.0.1:10010/exec/tok"},
		{"https://[::1]:1/attach/tok", "https://[::1]:1/attach/tok"},
		{"//[::]:33733/cri/exec/tok", "http://[::]:33733/cri/exec/tok"}, // cri-dockerd
		{"//127.0.0.1:35417/cri/attach/tok", "http://127.0.0.1:35417/cri/attach/tok"},
		{"/cri/exec/tok", ""}, // no host: nothing to dial
		{"ftp://h/exec/tok", ""},
	} {
		u, _ := url.Parse(tc.in)
		got, err := ResolveStreamURL(u)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: got %s, want an error", tc.in, got)
		case tc.want != "" && (err != nil || got.String() != tc.want):
			t.Errorf("%s: got %v %v, want %s", tc.in, got, err, tc.want)
		}
	}
}
