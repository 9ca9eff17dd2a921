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
//
// Reading order: main.go (flags, the image's config, manifest, index and
// layout), then layer.go (its one layer's tar). Nothing runs back up.
package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
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
	cfgBlob, layerBlob := newBlob(imageConfig(diffID, entrypoint, cmd, user)), newBlob(layer)
	manBlob := newBlob(imageManifest(cfgBlob, layerBlob))
	return writeLayout(out, imageIndex(name, manBlob), cfgBlob, layerBlob, manBlob)
}

// imageConfig is the image's configuration: its one layer, and the
// entrypoint, Cmd and User asked for.
func imageConfig(diffID, entrypoint, cmd, user string) []byte {
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
	return cfgJSON
}

// imageManifest is the manifest of the configuration and the layer.
func imageManifest(cfgBlob, layerBlob blob) []byte {
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfgBlob.digest, "size": len(cfgBlob.data)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layerBlob.digest, "size": len(layerBlob.data)}},
	})
	return manifest
}

// imageIndex is the layout's index: the manifest, under the image's name
// and tag.
func imageIndex(name string, manBlob blob) []byte {
	tag := name[strings.LastIndex(name, ":")+1:]
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json",
			"digest":    manBlob.digest, "size": len(manBlob.data),
			"platform": map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			"annotations": map[string]string{
				"io.containerd.image.name":          name,
				"org.opencontainers.image.ref.name": tag,
			},
		}},
	})
	return index
}

// writeLayout writes the OCI image layout tarball out: the layout's
// marker, the index and the blobs.
func writeLayout(out string, index []byte, cfgBlob, layerBlob, manBlob blob) error {
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
		{"blobs/sha256/" + strings.TrimPrefix(cfgBlob.digest, "sha256:"), cfgBlob.data},
		{"blobs/sha256/" + strings.TrimPrefix(layerBlob.digest, "sha256:"), layerBlob.data},
		{"blobs/sha256/" + strings.TrimPrefix(manBlob.digest, "sha256:"), manBlob.data},
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
