// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// busyboxLayer returns a gzipped layer and the digest of its uncompressed
// tar (the diff ID).
func busyboxLayer(bin []byte, applets []string, adds addFlag) ([]byte, string, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	files, err := addedFiles(adds)
	if err != nil {
		return nil, "", err
	}
	if err := writeDirs(tw, layerDirs(applets, files)); err != nil {
		return nil, "", err
	}
	if err := writeBusybox(tw, bin, applets); err != nil {
		return nil, "", err
	}
	if err := writeAdded(tw, files); err != nil {
		return nil, "", err
	}
	if err := writeAccounts(tw, files); err != nil {
		return nil, "", err
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), "sha256:" + hex.EncodeToString(sum[:]), nil
}

// layerDirs is the layer's directories, sorted: the root's usual ones and
// every one that holds an applet or an added file.
func layerDirs(applets []string, files []addedFile) []string {
	dirs := map[string]bool{"bin/": true, "tmp/": true, "etc/": true, "proc/": true, "sys/": true, "dev/": true, "root/": true}
	paths := append([]string(nil), applets...)
	for _, f := range files {
		paths = append(paths, f.name)
	}
	for _, a := range paths {
		if i := strings.LastIndex(a, "/"); i > 0 {
			for p := a[:i]; p != ""; {
				dirs[p+"/"] = true
				if j := strings.LastIndex(p, "/"); j > 0 {
					p = p[:j]
				} else {
					p = ""
				}
			}
		}
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	return names
}

// writeDirs writes the directories' entries (tmp/ sticky and writable by
// all).
func writeDirs(tw *tar.Writer, names []string) error {
	for _, d := range names {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: mode}); err != nil {
			return err
		}
	}
	return nil
}

// writeBusybox writes bin/busybox and a hard link to it for each applet.
func writeBusybox(tw *tar.Writer, bin []byte, applets []string) error {
	if err := tw.WriteHeader(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	for _, a := range applets {
		if a == "bin/busybox" {
			continue
		}
		// Hard links carry a mode too: extraction applies it to the shared inode.
		if err := tw.WriteHeader(&tar.Header{Name: a, Typeflag: tar.TypeLink, Linkname: "bin/busybox", Mode: 0o755}); err != nil {
			return err
		}
	}
	return nil
}

// writeAdded writes the files -add named.
func writeAdded(tw *tar.Writer, files []addedFile) error {
	for _, f := range files {
		data, err := os.ReadFile(f.src)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// writeAccounts writes root's etc/passwd and etc/group, unless -add gave
// them.
func writeAccounts(tw *tar.Writer, files []addedFile) error {
	for name, content := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	} {
		if slices.ContainsFunc(files, func(f addedFile) bool { return f.name == name }) {
			continue // -add gave its own
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content))}); err != nil {
			return err
		}
		_, _ = tw.Write([]byte(content))
	}
	return nil
}

// addedFile is one regular file -add puts in the layer.
type addedFile struct {
	src, name string // name: the path in the image, without the leading slash
	mode      int64
}

// addedFiles expands -add's pairs into regular files, directories walked
// and symbolic links followed, sorted by name so the layer (and its digest)
// depends on the inputs alone.
func addedFiles(adds addFlag) ([]addedFile, error) {
	var files []addedFile
	for _, a := range adds {
		src, dst := a[0], strings.TrimPrefix(a[1], "/")
		err := filepath.WalkDir(src, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			st, err := os.Stat(p) // follows links: a library's soname link becomes the file
			if err != nil {
				return err
			}
			if st.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(src, p)
			files = append(files, addedFile{src: p, name: filepath.ToSlash(filepath.Join(dst, rel)), mode: int64(st.Mode().Perm())})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("-add %s: %w", a[0], err)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, nil
}
