// Command runc-oom runs runc with every negative oom_score_adj in the
// container's or the exec's process spec raised to 0, as containerd's
// restrict_oom_score_adj does: this Docker engine's host refuses negative
// scores (no CAP_SYS_RESOURCE), and CRI-O, which has no such setting, asks
// -998 for every pod's infra container. CRI-O names it as its runtime's
// path in the kind node and the hermetic CRI-O (hack/crio.sh); every other
// argument goes to runc unchanged.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// runc is the binary run in the end (Debian's package).
const runc = "/usr/sbin/runc"

func main() {
	if spec := specFile(os.Args[1:]); spec != "" {
		if err := restrict(spec); err != nil {
			fmt.Fprintf(os.Stderr, "runc-oom: %v\n", err)
			os.Exit(1)
		}
	}
	err := syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "runc-oom: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// specFile returns the process spec a runc command line will read: the
// bundle's config.json for create and run, the --process file for exec.
func specFile(args []string) string {
	var cmd, bundle, process string
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() string {
			if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "-") {
				return v
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--bundle" || a == "-b" || strings.HasPrefix(a, "--bundle="):
			bundle = value()
		case a == "--process" || a == "-p" || strings.HasPrefix(a, "--process="):
			process = value()
		case a == "--root" || a == "--log" || a == "--log-format" || a == "--criu" || a == "--pid-file" ||
			a == "--console-socket" || a == "--preserve-fds":
			value()
		case cmd == "" && !strings.HasPrefix(a, "-"):
			cmd = a
		}
	}
	switch {
	case cmd == "exec" && process != "":
		return process
	case cmd == "create" || cmd == "run":
		if bundle == "" {
			bundle = "."
		}
		return filepath.Join(bundle, "config.json")
	}
	return ""
}

// restrict rewrites file with its oomScoreAdj (a runtime spec's
// process.oomScoreAdj, or a process spec's own) raised to 0 if negative.
func restrict(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	proc := spec
	if p, ok := spec["process"].(map[string]any); ok {
		proc = p
	}
	if adj, ok := proc["oomScoreAdj"].(float64); !ok || adj >= 0 {
		return nil
	}
	proc["oomScoreAdj"] = 0
	if data, err = json.Marshal(spec); err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o600)
}
