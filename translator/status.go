// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"

	"github.com/kubestream/kubestream/internal/wire"
)

// ExitCode returns the exit code a Status carries, 0 for success and -1
// when it carries none.
func ExitCode(st *metav1.Status) int {
	if st == nil {
		return -1
	}
	if st.Status == metav1.StatusSuccess {
		return 0
	}
	if st.Reason != remotecommand.NonZeroExitCodeReason || st.Details == nil {
		return -1
	}
	for _, c := range st.Details.Causes {
		if c.Type == remotecommand.ExitCodeCauseType {
			if n, err := strconv.Atoi(c.Message); err == nil {
				return n
			}
		}
	}
	return -1
}

// Stopping is the cause a server ends its sessions' contexts with when it
// stops: the translator tells each client its message. Empty, the node's
// streaming server is shutting down.
func Stopping(message string) error {
	if message == "" {
		message = defaultStopMessage
	}
	return stopping(message)
}

type stopping string

func (s stopping) Error() string { return string(s) }

const defaultStopMessage = "the node's streaming server is shutting down"

// stopMessage is what a client is told when ctx ended a session: the
// Stopping cause it was ended with, or the default.
func stopMessage(ctx context.Context) string {
	var s stopping
	if errors.As(context.Cause(ctx), &s) {
		return string(s)
	}
	return defaultStopMessage
}

// runtimeEndedMsg is what a client is told when the runtime's connection
// ended before the session's status.
const runtimeEndedMsg = "the container runtime ended the session without reporting its exit status"

// parseRuntimeStatus decodes what a v4 runtime wrote on its error stream.
// The runtime's JSON is forwarded verbatim when it is a valid Status, so the
// client sees exactly the message the runtime wrote.
func parseRuntimeStatus(raw []byte) (*metav1.Status, []byte) {
	if len(raw) == 0 {
		st := wire.InternalError(runtimeEndedMsg)
		return st, wire.StatusFrame(st)
	}
	var st metav1.Status
	if err := json.Unmarshal(raw, &st); err != nil || st.Status == "" {
		// v1/v2-style plain-text errors never reach here (we only speak
		// v4 to runtimes), but keep a misbehaving runtime's words.
		s := wire.InternalError("container runtime: " + string(raw))
		return s, wire.StatusFrame(s)
	}
	return &st, append([]byte{remotecommand.StreamErr}, raw...)
}
