// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubelet is the upstream kubelet v1.37.2 with kubestream linked in:
// server.go.patch adds one hook to the kubelet's HTTP server
// (NewStreamingHandler) through which /exec, /attach and /portForward are
// served by kubestream, behind the kubelet's own authentication and
// authorization; everything else is the stock kubelet. `hack/kube.sh
// kubelet` builds this with the patch laid over hack/kube's copy of
// k8s.io/kubernetes by go build -overlay. The modules for other versions
// build this one file: hack/kube/kubelet-VERSION/main.go is a symbolic link
// to it (git mode 120000), not a copy; what differs between versions is in
// version.go (prepare).
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // as in cmd/kubelet
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // as in cmd/kubelet
	_ "k8s.io/component-base/metrics/prometheus/version"  // as in cmd/kubelet
	"k8s.io/kubernetes/cmd/kubelet/app"
	kubeletserver "k8s.io/kubernetes/pkg/kubelet/server"

	"github.com/kubestream/kubestream/config"
	kubeletadapter "github.com/kubestream/kubestream/kubelet"
)

func main() {
	// kubestream's own settings come from one file named by one flag the
	// kubelet's parser does not know (so it is taken out first); a bad
	// file stops the kubelet here, before it starts anything.
	args, path, err := config.SplitArgs(os.Args[1:])
	var file *config.StreamingConfiguration
	if err == nil {
		file, err = config.Load(path)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet: --%s: %v\n", config.FlagName, err)
		os.Exit(1)
	}
	opts, err := prepare()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet: %v\n", err)
		os.Exit(1)
	}
	opts.File = file
	opts.Stopper = &kubeletadapter.Stopper{}
	kubeletserver.NewStreamingHandler = kubeletadapter.Hook(opts)
	cmd := app.NewKubeletCommand(context.Background())
	cmd.SetArgs(args)
	code := cli.Run(cmd)
	// The kubelet has returned (told to stop, or failed): its streaming
	// sessions are told why before the process ends them.
	opts.Stopper.Stop(kubeletadapter.StopWait)
	os.Exit(code)
}
