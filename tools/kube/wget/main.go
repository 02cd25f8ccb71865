// Command wget is the busybox image's wget: Debian's busybox 1.35 crashes (SIGSEGV) on `wget -T N`,
// which conformance tests run (`wget -q -O - -T 1 URL`, `wget -T 5 -qO- URL`), so the images built
// by the harness carry this instead of the applet. It takes the options of busybox's wget that
// scripts use and behaves as it does: the body to a file (-O FILE; `-` is stdout; default the
// URL's last path element), nothing else on stdout, `wget: ...` on stderr and exit status 1 on any
// failure (an HTTP status >= 400 included).
//
//	wget [-cqsS] [--spider] [-T SEC] [-O FILE] [-U AGENT] [--header 'H: V'] [-Y on/off]
//	     [--post-data STR | --post-file FILE] URL...
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

type options struct {
	quiet     bool
	spider    bool
	headers   bool // -S: the server's response headers on stderr
	timeout   time.Duration
	output    string
	userAgent string
	postData  *string // --post-data, or --post-file's contents: a POST, as busybox's
	extra     http.Header
	urls      []string
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "wget: %s\nusage: wget [-cqsS] [--spider] [-T SEC] [-O FILE] [-U AGENT] [--header 'H: V'] URL...\n", msg)
	os.Exit(1)
}

// parse reads busybox-style arguments: short options may be combined (`-qO-`, `-qO file`) and a
// short option's value may be attached (`-T5`) or the next argument.
func parse(args []string) options {
	o := options{timeout: 900 * time.Second, userAgent: "Wget", extra: http.Header{}}
	value := func(i *int, attached string, name string) string {
		if attached != "" {
			return attached
		}
		*i++
		if *i >= len(args) {
			usage("option requires an argument -- " + name)
		}
		return args[*i]
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			o.urls = append(o.urls, args[i+1:]...)
			return o
		case arg == "--spider":
			o.spider = true
		case arg == "--quiet":
			o.quiet = true
		case arg == "--server-response":
			o.headers = true
		case strings.HasPrefix(arg, "--timeout"):
			o.timeout = seconds(longValue(args, &i, "--timeout"))
		case strings.HasPrefix(arg, "--output-document"):
			o.output = longValue(args, &i, "--output-document")
		case strings.HasPrefix(arg, "--user-agent"):
			o.userAgent = longValue(args, &i, "--user-agent")
		case strings.HasPrefix(arg, "--post-data"):
			data := longValue(args, &i, "--post-data")
			o.postData = &data
		case strings.HasPrefix(arg, "--post-file"):
			file := longValue(args, &i, "--post-file")
			contents, err := os.ReadFile(file)
			if err != nil {
				fmt.Fprintf(os.Stderr, "wget: can't open '%s': %v\n", file, err)
				os.Exit(1)
			}
			data := string(contents)
			o.postData = &data
		case strings.HasPrefix(arg, "--header"):
			addHeader(&o, longValue(args, &i, "--header"))
		case strings.HasPrefix(arg, "--proxy"), strings.HasPrefix(arg, "--no-check-certificate"),
			arg == "--continue", arg == "--no-verbose":
			// Accepted and ignored, as busybox does without proxies or TLS verification settings.
			if arg == "--proxy" {
				i++
			}
		case strings.HasPrefix(arg, "--"):
			usage("unrecognized option '" + arg + "'")
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			for j := 1; j < len(arg); j++ {
				rest := arg[j+1:]
				switch arg[j] {
				case 'q':
					o.quiet = true
				case 's':
					o.spider = true
				case 'S':
					o.headers = true
				case 'c', 'v':
				case 'T':
					o.timeout = seconds(value(&i, rest, "T"))
					j = len(arg)
				case 'O':
					o.output = value(&i, rest, "O")
					j = len(arg)
				case 'U':
					o.userAgent = value(&i, rest, "U")
					j = len(arg)
				case 'Y', 'P':
					value(&i, rest, string(arg[j]))
					j = len(arg)
				default:
					usage("invalid option -- '" + string(arg[j]) + "'")
				}
			}
		default:
			o.urls = append(o.urls, arg)
		}
	}
	return o
}

func longValue(args []string, i *int, name string) string {
	if v, ok := strings.CutPrefix(args[*i], name+"="); ok {
		return v
	}
	*i++
	if *i >= len(args) {
		usage("option '" + name + "' requires an argument")
	}
	return args[*i]
}

func addHeader(o *options, h string) {
	name, value, ok := strings.Cut(h, ":")
	if !ok {
		usage("bad header '" + h + "'")
	}
	o.extra.Add(strings.TrimSpace(name), strings.TrimSpace(value))
}

func seconds(s string) time.Duration {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		usage("invalid number '" + s + "'")
	}
	return time.Duration(n * float64(time.Second))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "wget: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	o := parse(os.Args[1:])
	if len(o.urls) == 0 {
		usage("missing URL")
	}
	for _, raw := range o.urls {
		fetch(o, raw)
	}
}

func fetch(o options, raw string) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		fail("bad address '%s'", raw)
	}
	client := &http.Client{
		// -T bounds every network wait, as busybox's does (connect, headers, and each read below).
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: o.timeout}).DialContext,
			ResponseHeaderTimeout: o.timeout,
			DisableKeepAlives:     true,
			Proxy:                 nil,
		},
	}
	method := http.MethodGet
	var body io.Reader
	if o.spider {
		method = http.MethodHead
	} else if o.postData != nil {
		method = http.MethodPost
		body = strings.NewReader(*o.postData)
	}
	req, err := http.NewRequest(method, u.String(), body)
	if err != nil {
		fail("bad address '%s'", raw)
	}
	if o.postData != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header = o.extra.Clone()
	req.Header.Set("User-Agent", o.userAgent)
	if !o.quiet {
		fmt.Fprintf(os.Stderr, "Connecting to %s\n", u.Host)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			fail("download timed out")
		}
		fail("can't connect to remote host: %v", unwrap(err))
	}
	defer resp.Body.Close()
	if o.headers {
		fmt.Fprintf(os.Stderr, "  %s %s\n", resp.Proto, resp.Status)
		for name, values := range resp.Header {
			for _, v := range values {
				fmt.Fprintf(os.Stderr, "  %s: %s\n", name, v)
			}
		}
	}
	if resp.StatusCode >= 400 {
		fail("server returned error: %s %s", resp.Proto, resp.Status)
	}
	if o.spider {
		if !o.quiet {
			fmt.Fprintln(os.Stderr, "remote file exists")
		}
		return
	}
	out := io.Writer(os.Stdout)
	name := o.output
	if name == "" {
		name = path.Base(u.Path)
		if name == "/" || name == "." || name == "" {
			name = "index.html"
		}
	}
	if name != "-" {
		file, err := os.Create(name)
		if err != nil {
			fail("can't open '%s': %v", name, err)
		}
		defer file.Close()
		out = file
		if !o.quiet {
			fmt.Fprintf(os.Stderr, "saving to '%s'\n", name)
		}
	}
	if _, err := io.Copy(out, &deadlineReader{r: resp.Body, timeout: o.timeout}); err != nil {
		if err == errTimeout {
			fail("download timed out")
		}
		fail("error getting response: %v", err)
	}
	if !o.quiet && name != "-" {
		fmt.Fprintf(os.Stderr, "'%s' saved\n", name)
	}
}

func unwrap(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

var errTimeout = fmt.Errorf("timed out")

// deadlineReader fails a read that waits longer than timeout for data.
type deadlineReader struct {
	r       io.Reader
	timeout time.Duration
}

type readResult struct {
	n   int
	err error
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	done := make(chan readResult, 1)
	buf := make([]byte, len(p))
	go func() {
		n, err := d.r.Read(buf)
		done <- readResult{n, err}
	}()
	select {
	case r := <-done:
		copy(p, buf[:r.n])
		return r.n, r.err
	case <-time.After(d.timeout):
		return 0, errTimeout
	}
}
