// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/pki"
	"github.com/kubestream/kubestream/refruntime"
	"github.com/kubestream/kubestream/refruntime/crifixture"
)

// newDemo is the README's first command: kubestream serve on the embedded
// reference runtime with throwaway certificates, and one exec through the
// WebSocket (v5) translation path for everyone to see.
func newDemo() *cobra.Command {
	var exit, refWebSockets bool
	var port int
	var endpoint, image, namespace string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Serve on the embedded reference runtime (or a real one) and show an exec through the WebSocket path",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			dir, err := os.MkdirTemp("", "kubestream-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			certs, err := pki.WriteNodeSet(dir, "kube-apiserver-kubelet-client")
			if err != nil {
				return err
			}
			o := app.NewServeOptions()
			o.Address, o.Port = "127.0.0.1", port
			o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile = certs.ServerCert, certs.ServerKey, certs.CA
			o.ContainerRuntimeEndpoint = endpoint
			// The embedded runtime serves its streaming URLs through
			// kubestream's runtime-side server (cri/streaming): the demo's
			// exec is WebSocket on every leg.
			o.ReferenceWebSockets = refWebSockets
			if endpoint == "" && namespace != "default" {
				return fmt.Errorf("--demo-namespace is for a real runtime; the embedded runtime's demo pod is default/demo")
			}
			if endpoint != "" {
				remove, err := demoPod(ctx, endpoint, image, namespace, dir)
				if err != nil {
					return err
				}
				defer remove()
			}
			run, err := app.Start(ctx, o)
			if err != nil {
				return err
			}
			defer run.Stop()

			client := &app.ClientOptions{
				Server: run.URL, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, CAFile: certs.CA,
				Namespace: namespace, Container: "app", Protocol: "websocket", Stdin: true,
			}
			script := `read line; echo "container app of pod ` + namespace + `/demo read: $line"; echo "this line is on stderr" >&2; uname -sr; exit 3`
			fmt.Printf("\n$ echo 'hello over v5.channel.k8s.io' | kubestream exec demo -n %s -c app -i --protocol=websocket -- sh -c '…'\n", namespace)
			err = client.RunRemoteCommand(ctx, "exec", "demo", []string{"sh", "-c", script},
				strings.NewReader("hello over v5.channel.k8s.io\n"), os.Stdout, os.Stdout)
			fmt.Printf("→ exec ended with: %v (exit code 3 expected: it travelled back on v5 channel 3)\n", err)
			fmt.Printf("→ offered to the runtime unchanged first: %s\n", metricSummary(run, "kubestream_runtime_websocket_offers_total"))
			fmt.Printf("  (%s)\n", offerOutcome(run, runtimeName(endpoint)))
			fmt.Printf("→ route taken: %s\n\n", metricSummary(run, "kubestream_streaming_requests_total"))
			if exit {
				return nil
			}
			fmt.Printf("kubestream is serving %s on %s (pod %s/demo, container app). Try:\n", run.URL, run.Endpoint, namespace)
			fmt.Printf("  go run ./cmd/kubestream exec demo -n %s -c app -v=1 --server %s --client-certificate %s --client-key %s --certificate-authority %s -- ls /\n",
				namespace, run.URL, certs.ClientCert, certs.ClientKey, certs.CA)
			fmt.Printf("Ctrl-C stops it.\n")
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().BoolVar(&exit, "exit", false, "Exit after the demonstration exec instead of serving on.")
	cmd.Flags().IntVar(&port, "port", 0, "Port to serve on (0 picks a free one).")
	cmd.Flags().BoolVar(&refWebSockets, "reference-websockets", true, "Serve the embedded runtime's streaming URLs with kubestream's runtime-side server, which speaks v5 itself (false: cri-streaming's, which refuses it, and kubestream translates).")
	cmd.Flags().StringVar(&endpoint, "container-runtime-endpoint", "", "A real CRI runtime to demonstrate against (the embedded one when empty); pod demo is created there for the demo and removed after.")
	cmd.Flags().StringVar(&namespace, "demo-namespace", "default", "Namespace of the demo pod on a real runtime (the embedded runtime's is default).")
	cmd.Flags().StringVar(&image, "demo-image", "docker.io/kubestream/busybox:e2e", "Image of the demo pod on a real runtime (must already be present).")
	return cmd
}

// demoPod starts pod <namespace>/demo (container app: a shell with stdin open)
// on a real runtime, as a kubelet would, and returns its removal.
func demoPod(ctx context.Context, endpoint, image, namespace, dir string) (func(), error) {
	c, err := cri.Dial(ctx, endpoint, time.Minute)
	if err != nil {
		return nil, err
	}
	id, err := crifixture.RunPod(ctx, c.Runtime(), crifixture.Pod{
		Namespace: namespace, Name: "demo", UID: "kubestream-demo", HostNetwork: true, Image: image, LogDir: dir,
		Containers: []refruntime.ContainerSpec{{Name: "app", Command: []string{"/bin/sh"}, Stdin: true}},
	})
	remove := func() {
		if id != "" {
			crifixture.RemovePod(context.Background(), c.Runtime(), id)
		}
		c.Close()
	}
	if err != nil {
		remove()
		return nil, err
	}
	return remove, nil
}

// runtimeName names the runtime as the demo's sentences speak of it.
func runtimeName(endpoint string) string {
	switch {
	case endpoint == "":
		return "the embedded reference runtime"
	case strings.Contains(endpoint, "containerd"):
		return "containerd"
	}
	return "the runtime at " + endpoint
}

// offerOutcome says what the runtime answered to the direct offer, from
// the metrics, so the sentence is true for whichever runtime ran.
func offerOutcome(run *app.Running, name string) string {
	switch {
	case metricValue(run, "kubestream_runtime_websocket_offers_total", "result", "accepted") > 0:
		return name + " speaks v5 itself: the session was spliced through unchanged"
	case metricValue(run, "kubestream_runtime_websocket_offers_total", "result", "refused") > 0:
		return name + " refused v5, as every cri-streaming runtime does: kubestream translated to its SPDY and remembers the refusal"
	}
	return "no offer was made: kubestream translated to the runtime's SPDY"
}

func metricValue(run *app.Running, name, label, value string) float64 {
	mfs, err := run.Server.Metrics().Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func metricSummary(run *app.Running, name string) string {
	mfs, err := run.Server.Metrics().Registry.Gather()
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var l []string
			for _, lp := range m.GetLabel() {
				l = append(l, lp.GetName()+"="+lp.GetValue())
			}
			parts = append(parts, fmt.Sprintf("%s: %v", strings.Join(l, ","), m.GetCounter().GetValue()))
		}
	}
	return name + "{" + strings.Join(parts, "; ") + "}"
}
