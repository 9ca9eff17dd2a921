// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// StatusFrame marshals a Status behind the v5 error channel byte: the one
// message that ends a remotecommand session, in the form client-go's
// executors decode.
func StatusFrame(st *metav1.Status) []byte {
	b, err := json.Marshal(st)
	if err != nil { // a Status always marshals; keep the client informed anyway
		b = []byte(`{"metadata":{},"status":"Failure","message":"status encoding failed","reason":"InternalError","code":500}`)
	}
	return append([]byte{remotecommand.StreamErr}, b...)
}

// InternalError is the Status of a session that failed on the node's or
// the runtime's side.
func InternalError(msg string) *metav1.Status {
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Message: msg,
		Reason:  metav1.StatusReasonInternalError,
		Code:    http.StatusInternalServerError,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: msg}}},
	}
}

// BadRequest is the Status of a session the client broke (a v5 protocol
// error).
func BadRequest(msg string) *metav1.Status {
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Message: msg,
		Reason:  metav1.StatusReasonBadRequest,
		Code:    http.StatusBadRequest,
	}
}

// ExitStatus is the Status a runtime reports for what its Exec or Attach
// returned, as cri-streaming's remotecommand server words it: success, a
// non-zero exit code (an exec.ExitError that exited), or an internal error.
func ExitStatus(err error) *metav1.Status {
	if err == nil {
		return &metav1.Status{Status: metav1.StatusSuccess}
	}
	var exitErr utilexec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return &metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", exitErr),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
				Type:    remotecommand.ExitCodeCauseType,
				Message: fmt.Sprintf("%d", exitErr.ExitStatus()),
			}}},
		}
	}
	return InternalError(fmt.Sprintf("error executing command in container: %v", err))
}
