// Command fake-s3 is github.com/johannesboyne/gofakes3 (an S3 API server: objects, ListObjects
// V1/V2 with prefix, delimiter and paging, multipart uploads, conditional puts) with its in-memory
// backend (s3mem), served over plain HTTP with path-style addressing, for the harness's tests of
// s3:// stores through the object_store crate.
//
// Requests are not authenticated: signed and unsigned requests alike are served (gofakes3 does
// not check signatures), though a signed request's x-amz-date must be within 15 minutes of the
// server's clock.
//
// Flags: -host (default 127.0.0.1), -port (0: any free port; the address is printed on stdout as
// `listening on http://HOST:PORT`), -bucket NAME (repeatable; created at start), -log-level
// (debug, info, warn or error; default warn). Logs go to stderr.
package main

import (
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// names is a repeatable string flag.
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

func (n *names) Set(v string) error {
	*n = append(*n, v)
	return nil
}

func main() {
	host := flag.String("host", "127.0.0.1", "host to bind to")
	port := flag.Uint("port", 9000, "port to bind to (0: any free port, printed on stdout)")
	var buckets names
	flag.Var(&buckets, "bucket", "a bucket to create at start (repeatable)")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		log.Fatalf("fake-s3: -log-level %q: %v", *logLevel, err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	backend := s3mem.New()
	for _, bucket := range buckets {
		if err := gofakes3.ValidateBucketName(bucket); err != nil {
			log.Fatalf("fake-s3: -bucket %q: %v", bucket, err)
		}
		if err := backend.CreateBucket(bucket); err != nil && !gofakes3.IsAlreadyExists(err) {
			log.Fatalf("fake-s3: creating bucket %q: %v", bucket, err)
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(slogLogger{logger}))

	listener, err := net.Listen("tcp", fmt.Sprintf("%s:%d", *host, *port))
	if err != nil {
		log.Fatalf("fake-s3: listen: %v", err)
	}
	bound := listener.Addr().String()
	go func() {
		if err := http.Serve(listener, faker.Server()); err != nil {
			log.Fatalf("fake-s3: serve: %v", err)
		}
	}()
	logger.Info("server started", "url", "http://"+bound, "buckets", buckets.String())
	// The harness's fixture reads this line to learn the port when started with -port 0.
	fmt.Printf("listening on http://%s\n", bound)

	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
}

// slogLogger passes gofakes3's log lines to slog at their level.
type slogLogger struct{ logger *slog.Logger }

func (l slogLogger) Print(level gofakes3.LogLevel, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintln(v...))
	switch level {
	case gofakes3.LogErr:
		l.logger.Error(msg)
	case gofakes3.LogWarn:
		l.logger.Warn(msg)
	case gofakes3.LogInfo:
		l.logger.Info(msg)
	default:
		l.logger.Debug(msg)
	}
}
