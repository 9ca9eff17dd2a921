// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// kubectl-kubestream is a kubectl plugin for what kubestream's nodes serve
// beyond kubectl: port-forward --reverse (a listener in the pod, each
// connection dialled to a local port) and --udp. It reaches the node
// through the apiserver's pods/portforward, so it needs what kubectl
// port-forward needs (create pods/portforward).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestream/kubestream/cmd/kubectl-kubestream/app"
	"github.com/kubestream/kubestream/portmux"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	cmd := &cobra.Command{Use: "kubectl-kubestream", Short: "kubestream's additions to kubectl", SilenceUsage: true, SilenceErrors: true}
	cmd.AddCommand(portForward())
	return cmd
}

func portForward() *cobra.Command {
	var o app.Options
	var udp bool
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	cmd := &cobra.Command{
		Use:   "port-forward (--reverse POD REMOTE:LOCAL... | --udp POD LOCAL:REMOTE...)",
		Short: "Forward connections made inside a pod to local ports (--reverse), or UDP to a pod (--udp)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.Reverse && udp:
				return errors.New("--reverse and --udp cannot be used together: run one port-forward per mode")
			case !o.Reverse && !udp:
				return errors.New("one of --reverse or --udp is required (for TCP to the pod, use kubectl port-forward)")
			case net.ParseIP(o.Address) == nil:
				return fmt.Errorf("--address %q: want an IP address", o.Address)
			}
			o.Pod, o.Mappings, o.Out = args[0], args[1:], cmd.OutOrStdout()
			return run(cmd.Context(), clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides), o)
		},
	}
	cmd.Flags().BoolVar(&o.Reverse, "reverse", false, "Listen on the pod's loopback at REMOTE; each connection is forwarded to LOCAL on this machine.")
	cmd.Flags().BoolVar(&udp, "udp", false, "Forward UDP datagrams from LOCAL on this machine to REMOTE in the pod, and the replies back.")
	cmd.Flags().StringVar(&o.Address, "address", "127.0.0.1", "Local address: where --reverse connects to, and what --udp binds.")
	cmd.Flags().StringVar(&rules.ExplicitPath, "kubeconfig", "", "Path to the kubeconfig file.")
	clientcmd.BindOverrideFlags(overrides, cmd.Flags(), clientcmd.RecommendedConfigOverrideFlags(""))
	return cmd
}

func run(ctx context.Context, cc clientcmd.ClientConfig, o app.Options) error {
	cfg, err := cc.ClientConfig()
	if err != nil {
		return err
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return err
	}
	ms, err := o.Parse()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, o.Pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	u := cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(o.Pod).SubResource("portforward").URL()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = app.Run(ctx, cfg, app.Query(u, "ports", ms), o)
	var ns404 *app.NotServedError
	var se *portmux.SessionError
	switch {
	case errors.As(err, &ns404):
		return fmt.Errorf("node %s does not serve %s: its kubelet runs without kubestream, or its operator left the mode off", pod.Spec.NodeName, o.Mode())
	case errors.As(err, &se):
		return fmt.Errorf("%s to pod %s/%s ended: %s", o.Mode(), ns, o.Pod, se) // quoted: the node's text
	}
	return err
}
