// Command netproxy carries a local cluster's traffic between the machine's root network namespace
// and the cluster's hub namespace (where real nodes are reachable) through Unix sockets, which
// cross network namespaces, so that no route, link or address is ever added to the root namespace.
//
//	netproxy [-connect unix:PATH] [-forward LISTEN=TARGET]...
//
// -connect serves HTTP CONNECT on a Unix socket and dials the requested host:port from this
// process's namespace: kube-apiserver's egress selector (HTTPConnect over UDS) reaches kubelets and
// pods through it. -forward copies every connection accepted on LISTEN to TARGET; each is
// tcp:HOST:PORT or unix:PATH.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

type forwards []string

func (f *forwards) String() string     { return strings.Join(*f, ",") }
func (f *forwards) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	connect := flag.String("connect", "", "unix:PATH to serve HTTP CONNECT on")
	var fwd forwards
	flag.Var(&fwd, "forward", "LISTEN=TARGET (tcp:HOST:PORT or unix:PATH), repeatable")
	flag.Parse()
	if *connect == "" && len(fwd) == 0 {
		log.Fatal("nothing to do: give -connect and/or -forward")
	}
	var wg sync.WaitGroup
	if *connect != "" {
		l := listen(*connect)
		wg.Add(1)
		go func() { defer wg.Done(); serve(l, handleConnect) }()
	}
	for _, f := range fwd {
		from, to, ok := strings.Cut(f, "=")
		if !ok {
			log.Fatalf("-forward %q: want LISTEN=TARGET", f)
		}
		l := listen(from)
		network, address := split(to)
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(l, func(c net.Conn) {
				upstream, err := net.DialTimeout(network, address, 10*time.Second)
				if err != nil {
					log.Printf("forward %s: %v", to, err)
					c.Close()
					return
				}
				pipe(c, upstream)
			})
		}()
	}
	wg.Wait()
}

func split(endpoint string) (string, string) {
	network, address, ok := strings.Cut(endpoint, ":")
	if !ok || (network != "tcp" && network != "unix") {
		log.Fatalf("%q: want tcp:HOST:PORT or unix:PATH", endpoint)
	}
	return network, address
}

func listen(endpoint string) net.Listener {
	network, address := split(endpoint)
	if network == "unix" {
		_ = os.Remove(address)
	}
	l, err := net.Listen(network, address)
	if err != nil {
		log.Fatalf("listening on %s: %v", endpoint, err)
	}
	return l
}

func serve(l net.Listener, handle func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			log.Printf("accept on %s: %v", l.Addr(), err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go handle(c)
	}
}

func handleConnect(c net.Conn) {
	reader := bufio.NewReader(c)
	req, err := http.ReadRequest(reader)
	if err != nil || req.Method != http.MethodConnect {
		fmt.Fprint(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		c.Close()
		return
	}
	upstream, err := net.DialTimeout("tcp", req.Host, 10*time.Second)
	if err != nil {
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n%v", err)
		c.Close()
		return
	}
	fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	// Bytes the client sent after the request are already in the reader's buffer.
	if n := reader.Buffered(); n > 0 {
		buffered, _ := reader.Peek(n)
		if _, err := upstream.Write(buffered); err != nil {
			c.Close()
			upstream.Close()
			return
		}
	}
	pipe(c, upstream)
}

func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(a, b)
	go copyHalf(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}
