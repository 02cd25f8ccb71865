// Command fake-gcs-server is github.com/fsouza/fake-gcs-server (its fakestorage package, which
// is the whole emulator: JSON API, XML reads and listing, resumable uploads, in-memory or
// filesystem backend) served over plain HTTP, plus the XML API writes that upstream does not
// implement (fsouza/fake-gcs-server#331 and #852) and that the object_store crate uses for GCS:
//
//	PUT    /<bucket>/<object>                              simple upload (XML API)
//	POST   /<bucket>/<object>?uploads                      initiate a multipart upload
//	PUT    /<bucket>/<object>?partNumber=N&uploadId=ID     upload a part
//	POST   /<bucket>/<object>?uploadId=ID                  complete (CompleteMultipartUpload body)
//	DELETE /<bucket>/<object>?uploadId=ID                  abort
//
// These are served only for requests whose Host is -public-host (path style), as upstream routes
// its XML API; every other request goes to upstream's handler unchanged. Objects written here are
// stored through upstream's CreateObjectStreaming, so every read path sees them as usual.
// x-goog-if-generation-match is honoured on simple uploads and completion.
//
// The flags are upstream's names and meanings (a subset: no https, no gRPC, no events):
// -scheme http -host -port -backend memory|filesystem -filesystem-root -public-host -external-url
// -location -data -log-level. The unmodified upstream server is `go tool fake-gcs-server`.
package main

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

func main() {
	scheme := flag.String("scheme", "http", "only 'http' is supported by this wrapper")
	host := flag.String("host", "127.0.0.1", "host to bind to")
	port := flag.Uint("port", 4443, "port to bind to (0: any free port, printed on stdout)")
	backendName := flag.String("backend", "memory", "storage backend (memory or filesystem)")
	fsRoot := flag.String("filesystem-root", "", "filesystem root for the filesystem backend")
	publicHost := flag.String("public-host", "", "host:port clients use to reach the server (default: the bound address)")
	externalURL := flag.String("external-url", "", "URL returned in upload Location headers (default: http://<public host>)")
	location := flag.String("location", "US-CENTRAL1", "location for buckets")
	seed := flag.String("data", "", "where to load data from (provided that the directory exists)")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	flag.Parse()

	if *scheme != "http" {
		log.Fatalf("fake-gcs-server: -scheme %q: this wrapper serves plain http only", *scheme)
	}
	storageRoot := ""
	switch *backendName {
	case "memory":
	case "filesystem":
		if *fsRoot == "" {
			log.Fatal("fake-gcs-server: -backend filesystem needs -filesystem-root")
		}
		storageRoot = *fsRoot
	default:
		log.Fatalf("fake-gcs-server: -backend %q: use memory or filesystem", *backendName)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		log.Fatalf("fake-gcs-server: -log-level %q: %v", *logLevel, err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	listener, err := net.Listen("tcp", fmt.Sprintf("%s:%d", *host, *port))
	if err != nil {
		log.Fatalf("fake-gcs-server: listen: %v", err)
	}
	bound := listener.Addr().(*net.TCPAddr)
	if *publicHost == "" {
		*publicHost = bound.String()
	}
	if *externalURL == "" {
		*externalURL = "http://" + *publicHost
	}

	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		StorageRoot:     storageRoot,
		Seed:            *seed,
		Scheme:          "http",
		Host:            bound.IP.String(),
		Port:            uint16(bound.Port),
		PublicHost:      *publicHost,
		ExternalURL:     strings.TrimRight(*externalURL, "/"),
		Writer:          slogWriter{logger},
		BucketsLocation: *location,
		NoListener:      true,
	})
	if err != nil {
		log.Fatalf("fake-gcs-server: %v", err)
	}
	x := &xmlWrites{srv: srv, publicHost: *publicHost, uploads: map[string]*multipart{}, log: logger}
	go func() {
		if err := http.Serve(listener, x); err != nil {
			log.Fatalf("fake-gcs-server: serve: %v", err)
		}
	}()
	logger.Info("server started", "url", "http://"+bound.String(), "public-host", *publicHost)
	// The harness's fixture reads this line to learn the port when started with -port 0.
	fmt.Printf("listening on http://%s\n", bound.String())

	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
}

type slogWriter struct{ logger *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.logger.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}

type multipart struct {
	bucket, name string
	attrs        fakestorage.ObjectAttrs
	parts        map[int][]byte
}

type xmlWrites struct {
	srv        *fakestorage.Server
	publicHost string
	log        *slog.Logger

	mu      sync.Mutex
	uploads map[string]*multipart
}

// Path prefixes of upstream's own API, never a bucket of the XML API.
var reserved = map[string]bool{"storage": true, "upload": true, "download": true, "_internal": true, "batch": true}

func (x *xmlWrites) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if bucket, name, ok := x.xmlObject(r); ok {
		q := r.URL.Query()
		_, uploads := q["uploads"]
		uploadID := q.Get("uploadId")
		switch {
		case r.Method == http.MethodPut && uploadID != "" && q.Get("partNumber") != "":
			x.putPart(w, r, uploadID, q.Get("partNumber"))
			return
		case r.Method == http.MethodPut && !q.Has("uploadType") && !q.Has("upload_id") && !q.Has("X-Goog-Algorithm") && uploadID == "":
			x.putObject(w, r, bucket, name)
			return
		case r.Method == http.MethodPost && uploads:
			x.initiate(w, r, bucket, name)
			return
		case r.Method == http.MethodPost && uploadID != "":
			x.complete(w, r, uploadID)
			return
		case r.Method == http.MethodDelete && uploadID != "":
			x.abort(w, uploadID)
			return
		}
	}
	x.srv.HTTPHandler().ServeHTTP(w, r)
}

// xmlObject returns the bucket and object of a path-style XML API request to the public host.
func (x *xmlWrites) xmlObject(r *http.Request) (string, string, bool) {
	if r.Host != x.publicHost {
		return "", "", false
	}
	bucket, name, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !ok || bucket == "" || name == "" || reserved[bucket] {
		return "", "", false
	}
	return bucket, name, true
}

func xmlError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml; charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code><Message>%s</Message></Error>", code, xmlEscape(msg))
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func md5ETag(data []byte) string {
	sum := md5.Sum(data)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// attrsFrom reads the object attributes the XML API takes from request headers.
func attrsFrom(r *http.Request, bucket, name string) fakestorage.ObjectAttrs {
	attrs := fakestorage.ObjectAttrs{
		BucketName:         bucket,
		Name:               name,
		ContentType:        r.Header.Get("Content-Type"),
		ContentEncoding:    r.Header.Get("Content-Encoding"),
		ContentDisposition: r.Header.Get("Content-Disposition"),
		ContentLanguage:    r.Header.Get("Content-Language"),
		CacheControl:       r.Header.Get("Cache-Control"),
	}
	for key, values := range r.Header {
		if k := strings.ToLower(key); strings.HasPrefix(k, "x-goog-meta-") && len(values) > 0 {
			if attrs.Metadata == nil {
				attrs.Metadata = map[string]string{}
			}
			attrs.Metadata[strings.TrimPrefix(k, "x-goog-meta-")] = values[0]
		}
	}
	return attrs
}

func (x *xmlWrites) bucketExists(w http.ResponseWriter, bucket string) bool {
	if _, err := x.srv.Backend().GetBucket(bucket); err != nil {
		xmlError(w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist.")
		return false
	}
	return true
}

// preconditionHolds checks x-goog-if-generation-match against the object's current generation.
func (x *xmlWrites) preconditionHolds(w http.ResponseWriter, r *http.Request, bucket, name string) bool {
	want := r.Header.Get("x-goog-if-generation-match")
	if want == "" {
		return true
	}
	var current int64
	if obj, err := x.srv.GetObjectStreaming(bucket, name); err == nil {
		current = obj.Generation
		obj.Close()
	}
	if strconv.FormatInt(current, 10) != want {
		xmlError(w, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold.")
		return false
	}
	return true
}

// store writes the object through upstream and answers with its ETag and generation headers.
func (x *xmlWrites) store(w http.ResponseWriter, attrs fakestorage.ObjectAttrs, data []byte) (string, bool) {
	obj := fakestorage.Object{ObjectAttrs: attrs, Content: data}
	if err := x.srv.CreateObjectStreaming(obj.StreamingObject()); err != nil {
		xmlError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return "", false
	}
	created, err := x.srv.GetObjectStreaming(attrs.BucketName, attrs.Name)
	if err != nil {
		xmlError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return "", false
	}
	created.Close()
	etag := `"` + created.Etag + `"`
	if created.Etag == "" {
		etag = md5ETag(data)
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("x-goog-generation", strconv.FormatInt(created.Generation, 10))
	w.Header().Set("x-goog-metageneration", "1")
	return etag, true
}

func (x *xmlWrites) putObject(w http.ResponseWriter, r *http.Request, bucket, name string) {
	if !x.bucketExists(w, bucket) || !x.preconditionHolds(w, r, bucket, name) {
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		xmlError(w, http.StatusBadRequest, "IncompleteBody", err.Error())
		return
	}
	if _, ok := x.store(w, attrsFrom(r, bucket, name), data); ok {
		w.WriteHeader(http.StatusOK)
	}
}

func (x *xmlWrites) initiate(w http.ResponseWriter, r *http.Request, bucket, name string) {
	if !x.bucketExists(w, bucket) {
		return
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	uploadID := base64.RawURLEncoding.EncodeToString(id[:])
	x.mu.Lock()
	x.uploads[uploadID] = &multipart{bucket: bucket, name: name, attrs: attrsFrom(r, bucket, name), parts: map[int][]byte{}}
	x.mu.Unlock()
	w.Header().Set("Content-Type", "application/xml; charset=UTF-8")
	fmt.Fprintf(w, "<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'><Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>",
		xmlEscape(bucket), xmlEscape(name), uploadID)
}

func (x *xmlWrites) upload(w http.ResponseWriter, uploadID string) *multipart {
	x.mu.Lock()
	defer x.mu.Unlock()
	up := x.uploads[uploadID]
	if up == nil {
		xmlError(w, http.StatusNotFound, "NoSuchUpload", "The requested upload was not found.")
	}
	return up
}

func (x *xmlWrites) putPart(w http.ResponseWriter, r *http.Request, uploadID, partNumber string) {
	n, err := strconv.Atoi(partNumber)
	if err != nil || n < 1 || n > 10000 {
		xmlError(w, http.StatusBadRequest, "InvalidArgument", "partNumber must be 1..10000")
		return
	}
	up := x.upload(w, uploadID)
	if up == nil {
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		xmlError(w, http.StatusBadRequest, "IncompleteBody", err.Error())
		return
	}
	x.mu.Lock()
	up.parts[n] = data
	x.mu.Unlock()
	w.Header().Set("ETag", md5ETag(data))
	w.WriteHeader(http.StatusOK)
}

type completeRequest struct {
	Parts []struct {
		PartNumber int    `xml:"PartNumber"`
		ETag       string `xml:"ETag"`
	} `xml:"Part"`
}

func (x *xmlWrites) complete(w http.ResponseWriter, r *http.Request, uploadID string) {
	up := x.upload(w, uploadID)
	if up == nil {
		return
	}
	var req completeRequest
	if err := xml.NewDecoder(r.Body).Decode(&req); err != nil {
		xmlError(w, http.StatusBadRequest, "MalformedXML", err.Error())
		return
	}
	if len(req.Parts) == 0 {
		xmlError(w, http.StatusBadRequest, "MalformedXML", "no parts")
		return
	}
	x.mu.Lock()
	sort.SliceStable(req.Parts, func(i, j int) bool { return req.Parts[i].PartNumber < req.Parts[j].PartNumber })
	var data []byte
	for _, p := range req.Parts {
		part, ok := up.parts[p.PartNumber]
		if !ok || (p.ETag != "" && strings.Trim(p.ETag, `"`) != strings.Trim(md5ETag(part), `"`)) {
			x.mu.Unlock()
			xmlError(w, http.StatusBadRequest, "InvalidPart", fmt.Sprintf("part %d was not uploaded or its ETag differs", p.PartNumber))
			return
		}
		data = append(data, part...)
	}
	x.mu.Unlock()
	if !x.preconditionHolds(w, r, up.bucket, up.name) {
		return
	}
	etag, ok := x.store(w, up.attrs, data)
	if !ok {
		return
	}
	x.mu.Lock()
	delete(x.uploads, uploadID)
	x.mu.Unlock()
	w.Header().Set("Content-Type", "application/xml; charset=UTF-8")
	fmt.Fprintf(w, "<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'><Location>http://%s/%s/%s</Location><Bucket>%s</Bucket><Key>%s</Key><ETag>%s</ETag></CompleteMultipartUploadResult>",
		xmlEscape(x.publicHost), xmlEscape(up.bucket), xmlEscape(up.name), xmlEscape(up.bucket), xmlEscape(up.name), xmlEscape(etag))
}

func (x *xmlWrites) abort(w http.ResponseWriter, uploadID string) {
	x.mu.Lock()
	delete(x.uploads, uploadID)
	x.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
