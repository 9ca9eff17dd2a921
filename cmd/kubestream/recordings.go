// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubestream/kubestream/recording"
)

// newRecordings lists the terminal recordings in a directory with what
// their headers say about the session.
func newRecordings() *cobra.Command {
	return &cobra.Command{
		Use:   "recordings DIR",
		Short: "List terminal recordings (--session-recording-dir) with their audit fields",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := filepath.Glob(filepath.Join(args[0], "*.cast"))
			if err != nil {
				return err
			}
			sort.Strings(files)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "STARTED\tAUDIT ID\tUSER\tPOD\tCONTAINER\tSIZE\tCOMMAND\tFILE")
			for _, f := range files {
				h, err := readHeader(f)
				if err != nil {
					fmt.Fprintf(tw, "?\t?\t?\t?\t?\t?\t%v\t%s\n", err, f)
					continue
				}
				k := h.Kubestream
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\t%dx%d\t%s\t%s\n", time.Unix(h.Timestamp, 0).UTC().Format(time.RFC3339),
					k.AuditID, k.User, k.Namespace, k.Pod, k.Container, h.Width, h.Height, h.Command, f)
			}
			return tw.Flush()
		},
	}
}

func readHeader(path string) (recording.Header, error) {
	var h recording.Header
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil && err != io.EOF {
		return h, err
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Version != 2 {
		return h, fmt.Errorf("not an asciicast v2 recording")
	}
	return h, nil
}

// newReplay plays a recording's output back in the terminal, at its own
// pace or faster.
func newReplay() *cobra.Command {
	var speed float64
	var maxWait time.Duration
	cmd := &cobra.Command{
		Use:   "replay FILE",
		Short: "Play a terminal recording back (asciicast v2; asciinema play works too)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if speed <= 0 {
				return fmt.Errorf("--speed must be positive")
			}
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			return replay(f, cmd.OutOrStdout(), speed, maxWait)
		},
	}
	cmd.Flags().Float64Var(&speed, "speed", 1, "Playback speed (2: twice as fast).")
	cmd.Flags().DurationVar(&maxWait, "max-wait", 2*time.Second, "Longest pause between two outputs (0: as recorded).")
	return cmd
}

var errUnfinished = errors.New("the recording ends here: it is still being written, or its node stopped before closing it")

func replay(r io.Reader, out io.Writer, speed float64, maxWait time.Duration) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	if !sc.Scan() {
		return fmt.Errorf("empty recording")
	}
	var last float64
	for sc.Scan() {
		if len(sc.Bytes()) > 0 && sc.Bytes()[0] == 0 {
			// Zeros follow what a recording being written has on disk
			// (see recording.file).
			return errUnfinished
		}
		var ev []json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || len(ev) != 3 {
			return fmt.Errorf("bad event %q", strings.TrimSpace(sc.Text()))
		}
		var at float64
		var kind, data string
		if json.Unmarshal(ev[0], &at) != nil || json.Unmarshal(ev[1], &kind) != nil || json.Unmarshal(ev[2], &data) != nil {
			return fmt.Errorf("bad event %q", strings.TrimSpace(sc.Text()))
		}
		if kind != "o" {
			continue
		}
		wait := time.Duration((at - last) / speed * float64(time.Second))
		if maxWait > 0 && wait > maxWait {
			wait = maxWait
		}
		time.Sleep(wait)
		last = at
		if _, err := io.WriteString(out, data); err != nil {
			return err
		}
	}
	return sc.Err()
}
