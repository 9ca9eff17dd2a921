package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubestream/kubestream/cri"
)

type fakeLookup struct{}

func (fakeLookup) SandboxID(context.Context, cri.PodRef) (string, error) { return "sb", nil }
func (fakeLookup) ContainerID(context.Context, cri.PodRef, string) (string, error) {
	return "ctr", nil
}

// fakeRuntime hands out URLs of one test server and counts them.
type fakeRuntime struct {
	base  string
	calls int
}

func (f *fakeRuntime) url(kind string) (*url.URL, error) {
	f.calls++
	return url.Parse(f.base + "/" + kind + "/token")
}
func (f *fakeRuntime) Exec(context.Context, *runtimeapi.ExecRequest) (*url.URL, error) {
	return f.url("exec")
}
func (f *fakeRuntime) Attach(context.Context, *runtimeapi.AttachRequest) (*url.URL, error) {
	return f.url("attach")
}
func (f *fakeRuntime) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*url.URL, error) {
	return f.url("portforward")
}

type directAll struct{}

func (directAll) Supports(context.Context, string, string) bool { return true }

// TestDirectWebSocketSeam: when Config.Direct says the runtime speaks the
// client's WebSocket protocol itself, the upgrade goes to the runtime
// unchanged (route direct) instead of being translated.
func TestDirectWebSocketSeam(t *testing.T) {
	var gotProto, gotPath string
	runtimeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotProto, gotPath = r.Header.Get("Sec-WebSocket-Protocol"), r.URL.Path
		http.Error(w, "runtime saw it", http.StatusTeapot)
	}))
	defer runtimeSrv.Close()
	rt := &fakeRuntime{base: runtimeSrv.URL}
	s, err := New(Config{Lookup: fakeLookup{}, Runtime: rt, Direct: directAll{}})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(s)
	defer front.Close()
	req, _ := http.NewRequest(http.MethodGet, front.URL+"/exec/ns/pod/ctr?command=ls&output=1", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || gotProto != "v5.channel.k8s.io" || !strings.HasPrefix(gotPath, "/exec/") || rt.calls != 1 {
		t.Fatalf("status %d, runtime saw protocol %q path %q, CRI calls %d", resp.StatusCode, gotProto, gotPath, rt.calls)
	}
	mfs, _ := s.Metrics().Registry.Gather()
	var direct float64
	for _, mf := range mfs {
		if mf.GetName() != "kubestream_streaming_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" && l.GetValue() == string(RouteDirect) {
					direct += m.GetCounter().GetValue()
				}
			}
		}
	}
	if direct != 1 {
		t.Fatalf("requests counted as direct: %v", direct)
	}
}
