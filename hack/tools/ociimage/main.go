// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command ociimage writes the e2e images as OCI image layout tarballs, by
// hand and without a registry: a busybox image (the static busybox binary
// and a link for each applet), and on that layer any files or directories
// named with -add (the kind node's control-plane images: a component's
// binary, kube-proxy's iptables and the libraries it loads).
//
//	go run ./hack/tools/ociimage -busybox /bin/busybox -name docker.io/kubestream/busybox:e2e -out busybox.tar
//	go run ./hack/tools/ociimage -name registry.k8s.io/kube-scheduler:v1.37.2 -out s.tar \
//		-add bin/kube-scheduler=/usr/local/bin/kube-scheduler
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
)

func main() {
	busybox := flag.String("busybox", "/bin/busybox", "a statically linked busybox")
	name := flag.String("name", "docker.io/kubestream/busybox:e2e", "image name")
	out := flag.String("out", "image.tar", "output tarball (OCI image layout)")
	entrypoint := flag.String("entrypoint", "", "comma-separated entrypoint (default: none, Cmd sh)")
	cmd := flag.String("cmd", "", "comma-separated Cmd (default: sh without -entrypoint, none with it)")
	user := flag.String("user", "", "the image's User (default: none, root)")
	var adds addFlag
	flag.Var(&adds, "add", "SRC=DST: the file or directory SRC (symbolic links followed) at DST in the image; repeatable")
	flag.Parse()
	if err := run(*busybox, *name, *out, *entrypoint, *cmd, *user, adds); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

type blob struct {
	digest string
	data   []byte
}

func newBlob(data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}
}

// addFlag collects -add SRC=DST pairs in the order given.
type addFlag [][2]string

func (a *addFlag) String() string { return fmt.Sprint(*a) }

func (a *addFlag) Set(v string) error {
	src, dst, ok := strings.Cut(v, "=")
	if !ok || src == "" || !strings.HasPrefix(dst, "/") {
		return fmt.Errorf("want SRC=/absolute/DST, got %q", v)
	}
	*a = append(*a, [2]string{src, dst})
	return nil
}

func run(busybox, name, out, entrypoint, cmd, user string, adds addFlag) error {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	list, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("listing applets: %w", err)
	}
	layer, diffID, err := busyboxLayer(bin, strings.Fields(string(list)), adds)
	if err != nil {
		return err
	}
	cfg := map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"Cmd": []string{"sh"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	}
	if entrypoint != "" {
		cfg["config"].(map[string]any)["Entrypoint"] = strings.Split(entrypoint, ",")
		delete(cfg["config"].(map[string]any), "Cmd")
	}
	if cmd != "" {
		cfg["config"].(map[string]any)["Cmd"] = strings.Split(cmd, ",")
	}
	if user != "" {
		cfg["config"].(map[string]any)["User"] = user
	}
	cfgJSON, _ := json.Marshal(cfg)
	cfgBlob, layerBlob := newBlob(cfgJSON), newBlob(layer)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfgBlob.digest, "size": len(cfgJSON)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layerBlob.digest, "size": len(layer)}},
	})
	manBlob := newBlob(manifest)
	tag := name[strings.LastIndex(name, ":")+1:]
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json",
			"digest":    manBlob.digest, "size": len(manifest),
			"platform": map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			"annotations": map[string]string{
				"io.containerd.image.name":          name,
				"org.opencontainers.image.ref.name": tag,
			},
		}},
	})
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/sha256/" + strings.TrimPrefix(cfgBlob.digest, "sha256:"), cfgJSON},
		{"blobs/sha256/" + strings.TrimPrefix(layerBlob.digest, "sha256:"), layer},
		{"blobs/sha256/" + strings.TrimPrefix(manBlob.digest, "sha256:"), manifest},
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return err
		}
	}
	for _, fl := range files {
		if err := tw.WriteHeader(&tar.Header{Name: fl.name, Mode: 0o644, Size: int64(len(fl.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(fl.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// busyboxLayer returns a gzipped layer and the digest of its uncompressed
// tar (the diff ID).
func busyboxLayer(bin []byte, applets []string, adds addFlag) ([]byte, string, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	dirs := map[string]bool{"bin/": true, "tmp/": true, "etc/": true, "proc/": true, "sys/": true, "dev/": true, "root/": true}
	files, err := addedFiles(adds)
	if err != nil {
		return nil, "", err
	}
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
	for _, d := range names {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: mode}); err != nil {
			return nil, "", err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))}); err != nil {
		return nil, "", err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, "", err
	}
	for _, a := range applets {
		if a == "bin/busybox" {
			continue
		}
		// Hard links carry a mode too: extraction applies it to the shared inode.
		if err := tw.WriteHeader(&tar.Header{Name: a, Typeflag: tar.TypeLink, Linkname: "bin/busybox", Mode: 0o755}); err != nil {
			return nil, "", err
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f.src)
		if err != nil {
			return nil, "", err
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(data))}); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, "", err
		}
	}
	for name, content := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	} {
		if slices.ContainsFunc(files, func(f addedFile) bool { return f.name == name }) {
			continue // -add gave its own
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content))}); err != nil {
			return nil, "", err
		}
		_, _ = tw.Write([]byte(content))
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
