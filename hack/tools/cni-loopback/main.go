// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command cni-loopback is the smallest CNI plugin containerd accepts: it
// brings lo up in the pod's network namespace and reports its address.
// containerd runs a "loopback" plugin for every pod, and the e2e setup has
// no other network, so this binary is installed as both "loopback" and the
// e2e network's plugin.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

func main() {
	conf, _ := io.ReadAll(os.Stdin)
	var nc struct {
		CNIVersion string `json:"cniVersion"`
	}
	_ = json.Unmarshal(conf, &nc)
	if nc.CNIVersion == "" {
		nc.CNIVersion = "1.0.0"
	}
	switch os.Getenv("CNI_COMMAND") {
	case "ADD":
		if err := loUp(os.Getenv("CNI_NETNS")); err != nil {
			fail(nc.CNIVersion, err)
		}
		// containerd takes the pod IP from the result's eth0 and fails the
		// sandbox without one. There is no eth0: the pod only has lo, and
		// its loopback address is what it can be reached on from inside.
		out, _ := json.Marshal(map[string]any{
			"cniVersion": nc.CNIVersion,
			"interfaces": []any{map[string]string{"name": "eth0", "sandbox": os.Getenv("CNI_NETNS")}},
			"ips":        []any{map[string]any{"address": "127.0.0.1/8", "interface": 0}},
			"dns":        map[string]any{},
		})
		os.Stdout.Write(out)
	case "DEL", "CHECK", "GC", "STATUS":
	case "VERSION":
		fmt.Printf(`{"cniVersion":%q,"supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}`, nc.CNIVersion)
	default:
		fail(nc.CNIVersion, fmt.Errorf("unknown CNI_COMMAND %q", os.Getenv("CNI_COMMAND")))
	}
}

func fail(version string, err error) {
	out, _ := json.Marshal(map[string]any{"cniVersion": version, "code": 999, "msg": err.Error()})
	os.Stdout.Write(out)
	os.Exit(1)
}

// loUp enters the namespace on a locked thread (the process exits after,
// so the thread is never reused) and sets IFF_UP on lo.
func loUp(netns string) error {
	if netns == "" {
		return fmt.Errorf("CNI_NETNS not set")
	}
	runtime.LockOSThread()
	fd, err := unix.Open(netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening netns %s: %w", netns, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering netns %s: %w", netns, err)
	}
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("setting lo up: %w", err)
	}
	return nil
}
