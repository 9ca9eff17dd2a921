// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestHTTPStatus(t *testing.T) {
	for code, want := range map[codes.Code]int{
		codes.NotFound:           http.StatusNotFound,
		codes.InvalidArgument:    http.StatusBadRequest,
		codes.FailedPrecondition: http.StatusBadRequest,
		codes.Unavailable:        http.StatusServiceUnavailable,
		codes.DeadlineExceeded:   http.StatusServiceUnavailable,
		codes.Internal:           http.StatusInternalServerError,
	} {
		err := fmt.Errorf("CRI Exec: %w", wrap(status.Error(code, "x")))
		if got := HTTPStatus(err); got != want {
			t.Errorf("%v: %d, want %d", code, got, want)
		}
	}
	if HTTPStatus(errors.New("plain")) != http.StatusInternalServerError {
		t.Error("an unclassified error must be a 500")
	}
}

func TestGRPCTarget(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///run/containerd/containerd.sock": "unix:///run/containerd/containerd.sock",
		"/run/crio/crio.sock":                    "unix:///run/crio/crio.sock",
		"tcp://1.2.3.4:5":                        "",
		"unix://relative":                        "",
	} {
		got, err := grpcTarget(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
}
