// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build apiserver || kubelet

package e2e

import (
	"net/url"
	"slices"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kubestream/kubestream/audit"
)

// apiserverEvents reads the apiserver's audit log (its ResponseComplete
// events for streaming subresources).
func (cp *controlPlane) apiserverEvents(t *testing.T) []auditv1.Event {
	t.Helper()
	var out []auditv1.Event
	for _, e := range jsonLines[auditv1.Event](t, cp.auditLog) {
		if e.Stage == auditv1.StageResponseComplete && e.ObjectRef != nil {
			out = append(out, e)
		}
	}
	return out
}

// joinAudit joins every node session record (ResponseComplete, through the
// apiserver's kubelet client) to the one apiserver event it came from, by
// what both sides see: the pod, the subresource, the command (exec) or
// container, and time (the node's request arrives while the apiserver's is
// open). It fails on a record that joins to none or to more than one, and
// returns the apiserver audit IDs by node audit ID.
func joinAudit(t *testing.T, cp *controlPlane, nodeLog string, since time.Time) map[string]string {
	t.Helper()
	events := cp.apiserverEvents(t)
	joined := map[string]string{}
	for _, rec := range auditLog(t, nodeLog) {
		if rec.Stage != audit.StageResponseComplete || rec.ResponseStatus == nil || rec.ResponseStatus.Code != 101 ||
			rec.RequestReceivedTimestamp.Time.Before(since) {
			continue
		}
		var hits []string
		for _, e := range events {
			if e.ObjectRef.Subresource != rec.ObjectRef.Subresource ||
				e.ObjectRef.Namespace != rec.ObjectRef.Namespace || e.ObjectRef.Name != rec.ObjectRef.Name {
				continue
			}
			u, err := url.ParseRequestURI(e.RequestURI)
			if err != nil {
				continue
			}
			q := u.Query()
			if rec.ObjectRef.Subresource != "portforward" && (!slices.Equal(q["command"], rec.Command) || q.Get("container") != rec.ObjectRef.Container) {
				continue
			}
			// The node's request arrives after the apiserver's and before
			// the apiserver's session ends (one clock: no slack beyond
			// the timestamps' microseconds).
			at := rec.RequestReceivedTimestamp.Time
			if at.Before(e.RequestReceivedTimestamp.Time.Add(-time.Millisecond)) || at.After(e.StageTimestamp.Time.Add(time.Millisecond)) {
				continue
			}
			hits = append(hits, string(e.AuditID))
		}
		if len(hits) != 1 {
			t.Errorf("node record %s (%s %s/%s %q at %s, route %s, correlation %v) joins %d apiserver events %v",
				rec.AuditID, rec.ObjectRef.Subresource, rec.ObjectRef.Namespace, rec.ObjectRef.Name, rec.Command,
				rec.RequestReceivedTimestamp.Format(time.RFC3339Nano), rec.Route, rec.Correlation, len(hits), hits)
			for _, e := range events {
				t.Logf("apiserver %s %s %s..%s", e.AuditID, e.ObjectRef.Subresource, e.RequestReceivedTimestamp.Format(time.RFC3339Nano), e.StageTimestamp.Format(time.RFC3339Nano))
			}
			continue
		}
		joined[string(rec.AuditID)] = hits[0]
		t.Logf("node %s (%s, route %s, correlation %v) = apiserver %s", rec.AuditID, rec.ObjectRef.Subresource, rec.Route, rec.Correlation, hits[0])
	}
	seen := map[string]string{}
	for node, api := range joined {
		if other, ok := seen[api]; ok {
			t.Errorf("apiserver event %s joins two node sessions, %s and %s", api, other, node)
		}
		seen[api] = node
	}
	return joined
}
