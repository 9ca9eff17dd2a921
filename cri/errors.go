// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kind classifies a failure the way an HTTP client needs it.
type Kind int

const (
	Internal    Kind = iota // the runtime failed: 500
	NotFound                // unknown pod or container: 404
	BadRequest              // the request cannot be served as asked: 400
	Unavailable             // the runtime is unreachable or slow: 503
)

// Error is a CRI failure with its kind.
type Error struct {
	Kind Kind
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Msg != "" && e.Err != nil:
		return e.Msg + ": " + e.Err.Error()
	case e.Msg != "":
		return e.Msg
	default:
		return e.Err.Error()
	}
}

func (e *Error) Unwrap() error { return e.Err }

// wrap classifies a gRPC error from the runtime.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	kind := Internal
	switch status.Code(err) {
	case codes.NotFound:
		kind = NotFound
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		kind = BadRequest
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		kind = Unavailable
	case codes.Unknown, codes.Canceled:
		if errors.Is(err, context.DeadlineExceeded) {
			kind = Unavailable
		}
	}
	return &Error{Kind: kind, Err: err}
}

// HTTPStatus maps an error from this package to the status a client gets.
func HTTPStatus(err error) int {
	var e *Error
	if !errors.As(err, &e) {
		return http.StatusInternalServerError
	}
	switch e.Kind {
	case NotFound:
		return http.StatusNotFound
	case BadRequest:
		return http.StatusBadRequest
	case Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
