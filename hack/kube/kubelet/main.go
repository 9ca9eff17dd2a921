// Command kubelet is the upstream kubelet v1.37.2 with kubestream linked in:
// server.go.patch adds one hook to the kubelet's HTTP server
// (NewStreamingHandler) through which /exec, /attach and /portForward are
// served by kubestream, behind the kubelet's own authentication and
// authorization; everything else is the stock kubelet. `hack/kube.sh
// kubelet` applies the patch to a copy of k8s.io/kubernetes (_kubernetes,
// which go.mod points at) and builds this.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // as in cmd/kubelet
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // as in cmd/kubelet
	_ "k8s.io/component-base/metrics/prometheus/version"  // as in cmd/kubelet
	"k8s.io/kubernetes/cmd/kubelet/app"
	kubeletserver "k8s.io/kubernetes/pkg/kubelet/server"

	kubeletadapter "github.com/kubestream/kubestream/kubelet"
)

func main() {
	kubeletserver.NewStreamingHandler = kubeletadapter.NewStreamingHandler
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
