// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command registry serves OCI image layout tarballs (hack/tools/ociimage's)
// read-only over the registry API's pull side, on loopback, so a runtime
// whose tests insist on pulling (critest) gets the images built here with
// no registry on the network. Written by hand: only GET and HEAD of
// manifests and blobs are needed, and a whole registry would be a large
// dependency for that.
//
//	go run ./hack/tools/registry -addr 127.0.0.1:5000 busybox=busybox.tar
//
// Every repository whose last path element is a name given serves that
// image under any tag; it prints "READY host:port" once listening.
package main

import (
	"archive/tar"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
)

type image struct {
	manifest          string // its digest
	manifestMediaType string
	blobs             map[string][]byte // digest → content, the manifest among them
}

func load(file string) (*image, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img := &image{blobs: map[string][]byte{}}
	var index []byte
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		switch {
		case h.Name == "index.json":
			index = data
		case strings.HasPrefix(h.Name, "blobs/sha256/"):
			img.blobs["sha256:"+path.Base(h.Name)] = data
		}
	}
	var idx struct {
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil || len(idx.Manifests) == 0 {
		return nil, fmt.Errorf("%s: no manifest in index.json (%v)", file, err)
	}
	img.manifest, img.manifestMediaType = idx.Manifests[0].Digest, idx.Manifests[0].MediaType
	if img.blobs[img.manifest] == nil {
		return nil, fmt.Errorf("%s: manifest %s missing", file, img.manifest)
	}
	return img, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback)")
	flag.Parse()
	images := map[string]*image{}
	for _, arg := range flag.Args() {
		name, file, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintln(os.Stderr, "registry: want name=image.tar, got", arg)
			os.Exit(2)
		}
		img, err := load(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "registry:", err)
			os.Exit(1)
		}
		images[name] = img
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
	fmt.Println("READY", l.Addr().String())
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(images, w, r)
	}))
}

// serve answers /v2/ and /v2/<repo>/{manifests,blobs}/<ref>.
func serve(images map[string]*image, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "read-only", http.StatusMethodNotAllowed)
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/v2/")
	if p == "" || p == r.URL.Path {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		return
	}
	parts := strings.Split(p, "/")
	if len(parts) < 3 {
		http.NotFound(w, r)
		return
	}
	repo, kind, ref := parts[len(parts)-3], parts[len(parts)-2], parts[len(parts)-1]
	img := images[repo]
	if img == nil {
		http.NotFound(w, r)
		return
	}
	var digest, mediaType string
	switch kind {
	case "manifests":
		digest, mediaType = img.manifest, img.manifestMediaType
		if strings.HasPrefix(ref, "sha256:") && ref != img.manifest {
			http.NotFound(w, r)
			return
		}
	case "blobs":
		digest, mediaType = ref, "application/octet-stream"
	default:
		http.NotFound(w, r)
		return
	}
	data, ok := img.blobs[digest]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	if r.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}
