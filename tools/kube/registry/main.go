// Command registry is a read-only OCI registry (the Docker Registry HTTP API v2's pull side) over
// the image archives the harness builds: real nodes' containerd has it as the mirror of
// registry.k8s.io, so a pod that pulls with `imagePullPolicy: Always` gets the image built here.
//
//	registry -index <images dir>/registry.json -listen ADDR
//
// The index, written by the harness (harness/src/cluster/images), names each repository's tags
// and where each blob (manifests, configs, layers) lies inside the archives (a relative file is in
// the index's directory):
//
//	{"repositories": {"e2e-test-images/agnhost": {"2.66.1": "sha256:..."}},
//	 "blobs": {"sha256:...": {"file": "agnhost.oci.tar", "offset": 1536, "size": 1234,
//	                          "mediaType": "application/vnd.oci.image.manifest.v1+json"}}}
//
// Serves GET and HEAD of /v2/, /v2/<name>/manifests/<tag or digest>, /v2/<name>/blobs/<digest>,
// and /healthz, /metrics.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

type blob struct {
	File      string `json:"file"`
	Offset    int64  `json:"offset"`
	Size      int64  `json:"size"`
	MediaType string `json:"mediaType"`
}

type index struct {
	Repositories map[string]map[string]string `json:"repositories"`
	Blobs        map[string]blob              `json:"blobs"`
}

type server struct {
	dir      string
	index    index
	requests atomic.Int64
	failed   atomic.Int64
}

func main() {
	indexPath := flag.String("index", "", "the registry.json the harness wrote next to the image archives")
	listen := flag.String("listen", "127.0.0.1:5000", "the address to serve on")
	flag.Parse()
	if *indexPath == "" {
		log.Fatal("registry: -index is required")
	}
	text, err := os.ReadFile(*indexPath)
	if err != nil {
		log.Fatalf("registry: %v", err)
	}
	s := &server{dir: filepath.Dir(*indexPath)}
	if err := json.Unmarshal(text, &s.index); err != nil {
		log.Fatalf("registry: %s does not parse: %v", *indexPath, err)
	}
	log.Printf("registry: serving %d repositories, %d blobs on %s", len(s.index.Repositories), len(s.index.Blobs), *listen)
	srv := &http.Server{Addr: *listen, Handler: s, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		fmt.Fprintln(w, "ok")
		return
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE registry_requests_total counter\nregistry_requests_total %d\n", s.requests.Load())
		fmt.Fprintf(w, "# TYPE registry_failed_requests_total counter\nregistry_failed_requests_total %d\n", s.failed.Load())
		return
	}
	s.requests.Add(1)
	log.Printf("%s %s", r.Method, r.URL.Path)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		s.fail(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "this registry is read-only")
		return
	}
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "{}")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/")
	if !ok {
		s.fail(w, http.StatusNotFound, "NOT_FOUND", "not a registry path")
		return
	}
	if name, ref, ok := cut(rest, "/manifests/"); ok {
		s.manifest(w, r, name, ref)
		return
	}
	if _, digest, ok := cut(rest, "/blobs/"); ok {
		s.serveBlob(w, r, digest, "application/octet-stream", "BLOB_UNKNOWN")
		return
	}
	s.fail(w, http.StatusNotFound, "NOT_FOUND", "not a registry path")
}

// cut splits at the last sep, as repository names contain slashes.
func cut(path, sep string) (string, string, bool) {
	i := strings.LastIndex(path, sep)
	if i <= 0 || i+len(sep) >= len(path) {
		return "", "", false
	}
	return path[:i], path[i+len(sep):], true
}

func (s *server) manifest(w http.ResponseWriter, r *http.Request, name, ref string) {
	digest := ref
	if !strings.HasPrefix(ref, "sha256:") {
		tags, ok := s.index.Repositories[name]
		if !ok {
			s.fail(w, http.StatusNotFound, "NAME_UNKNOWN", "repository "+name+" is not built here")
			return
		}
		if digest, ok = tags[ref]; !ok {
			s.fail(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "no tag "+ref+" of "+name)
			return
		}
	}
	b, ok := s.index.Blobs[digest]
	if !ok || b.MediaType == "" || !strings.Contains(b.MediaType, "manifest") && !strings.Contains(b.MediaType, "index") {
		s.fail(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "no manifest "+digest)
		return
	}
	s.serveBlob(w, r, digest, b.MediaType, "MANIFEST_UNKNOWN")
}

func (s *server) serveBlob(w http.ResponseWriter, r *http.Request, digest, contentType, unknown string) {
	b, ok := s.index.Blobs[digest]
	if !ok {
		s.fail(w, http.StatusNotFound, unknown, "no blob "+digest)
		return
	}
	path := b.File
	if !filepath.IsAbs(path) {
		path = filepath.Join(s.dir, path)
	}
	file, err := os.Open(path)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	defer file.Close()
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Etag", `"`+digest+`"`)
	// ServeContent answers HEAD and Range requests, and sets Content-Length.
	http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(file, b.Offset, b.Size))
}

func (s *server) fail(w http.ResponseWriter, status int, code, message string) {
	s.failed.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"errors": []map[string]string{{"code": code, "message": message}}})
	w.Write(body)
}
