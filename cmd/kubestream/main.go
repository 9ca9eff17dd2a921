// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubestream runs the kubelet-side streaming server (serve), the
// whole kubelet API in front of a stock kubelet (node), a
// self-contained demonstration (demo) and client-go based clients (exec,
// attach, port-forward) for humans and scripts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/util/exec"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	cancel()
	klog.Flush()
	if err != nil {
		var ce exec.CodeExitError
		if errors.As(err, &ce) {
			os.Exit(ce.Code)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "kubestream",
		Short:         "Kubelet-side WebSocket streaming for kubectl exec, attach, cp and port-forward",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	gfs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(gfs)
	root.PersistentFlags().AddGoFlagSet(gfs)
	root.AddCommand(newServe(), newNode(), newDemo(), newRemoteCommand("exec"), newRemoteCommand("attach"), newPortForward(), newRecordings(), newReplay())
	return root
}

func newServe() *cobra.Command {
	o := app.NewServeOptions()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the kubelet streaming API (/exec, /attach, /portForward)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			run, err := app.Start(cmd.Context(), o)
			return untilDone(cmd.Context(), run, err)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func newNode() *cobra.Command {
	o := app.NewNodeOptions()
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Serve the whole kubelet API in front of a node's stock kubelet (docs/node.md): streaming by kubestream, the rest passed to the kubelet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			run, err := app.StartNode(cmd.Context(), o)
			return untilDone(cmd.Context(), run, err)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// untilDone keeps a started server running until ctx ends (SIGINT or
// SIGTERM: main's context), then stops it.
func untilDone(ctx context.Context, run *app.Running, err error) error {
	if err != nil {
		return err
	}
	<-ctx.Done()
	run.Stop()
	return nil
}

func newRemoteCommand(sub string) *cobra.Command {
	o := &app.ClientOptions{}
	use := "exec POD -c CONTAINER [flags] -- COMMAND [ARGS...]"
	if sub == "attach" {
		use = "attach POD -c CONTAINER [flags]"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: "Run " + sub + " against a kubelet API with client-go's executors",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Container == "" {
				return errors.New("--container is required")
			}
			command := args[1:]
			if sub == "exec" && len(command) == 0 {
				return errors.New("exec needs a command after --")
			}
			if sub == "attach" {
				command = nil
			}
			return o.RunRemoteCommand(cmd.Context(), sub, args[0], command, os.Stdin, os.Stdout, os.Stderr)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func newPortForward() *cobra.Command {
	o := &app.ClientOptions{}
	cmd := &cobra.Command{
		Use:   "port-forward POD [LOCAL:]REMOTE...",
		Short: "Forward local ports to a pod through the kubelet API",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.PortForward(cmd.Context(), args[0], args[1:], nil, os.Stdout)
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "container" || f.Name == "stdin" || f.Name == "tty" {
			f.Hidden = true
		}
	})
	return cmd
}
