package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

const (
	// operationHeader names the cloud operation a call belongs to, for the cloud's fault matching
	// and metrics (several operations share an endpoint).
	operationHeader = "X-Local-Cloud-Operation"
	// callTimeout bounds one attempt; a timed-out attempt is not retried.
	callTimeout = 5 * time.Second
	// retries of a call that failed to connect or got a 5xx, backing off from minBackoff doubling
	// to maxBackoff, with jitter: as the reference CCM's client does.
	retries    = 3
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// client calls the local cloud's HTTP API.
type client struct {
	http    *http.Client
	resolve func() (string, error)

	mu   sync.Mutex
	base string
}

func newClient(resolve func() (string, error)) *client {
	// The cloud is on loopback: never through a proxy from the environment.
	transport := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	return &client{http: &http.Client{Transport: transport, Timeout: callTimeout}, resolve: resolve}
}

func (c *client) baseURL() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base == "" {
		base, err := c.resolve()
		if err != nil {
			return "", err
		}
		c.base = base
	}
	return c.base, nil
}

// escape makes one path segment of a name.
func escape(segment string) string { return url.PathEscape(segment) }

// statusError is a non-2xx, non-404 answer.
type statusError struct {
	status  int
	message string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.message) }

// do sends one call, with retries; `out` (if not nil) gets the decoded answer. It reports false
// without an error for a 404, and an error naming the operation, method and URL for anything else
// that is not 2xx.
func (c *client) do(ctx context.Context, operation, method, path string, in, out any) (bool, error) {
	base, err := c.baseURL()
	if err != nil {
		return false, fmt.Errorf("%s: %w", operation, err)
	}
	target := base + path
	var body []byte
	if in != nil {
		if body, err = json.Marshal(in); err != nil {
			return false, fmt.Errorf("%s: encoding the request: %w", operation, err)
		}
	}
	backoff := minBackoff
	for attempt := 1; ; attempt++ {
		found, retryable, err := c.attempt(ctx, operation, method, target, body, out)
		if err == nil {
			return found, nil
		}
		if !retryable || attempt > retries {
			tries := ""
			if attempt > 1 {
				tries = fmt.Sprintf(" (after %d attempts)", attempt)
			}
			return false, fmt.Errorf("%s: %s %s: %w%s", operation, method, target, err, tries)
		}
		delay := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%s: %s %s: %w", operation, method, target, ctx.Err())
		case <-time.After(delay):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func (c *client) attempt(ctx context.Context, operation, method, target string, body []byte, out any) (found, retryable bool, err error) {
	request, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return false, false, err
	}
	request.Header.Set(operationHeader, operation)
	if body != nil {
		request.Header.Set("Content-Type", "application/json")
	}
	response, err := c.http.Do(request)
	if err != nil {
		var netErr net.Error
		timedOut := errors.As(err, &netErr) && netErr.Timeout()
		return false, !timedOut && ctx.Err() == nil, err
	}
	defer response.Body.Close()
	answer, err := io.ReadAll(response.Body)
	if err != nil {
		return false, true, fmt.Errorf("reading the answer: %w", err)
	}
	switch {
	case response.StatusCode == http.StatusNotFound:
		return false, false, nil
	case response.StatusCode < 200 || response.StatusCode > 299:
		return false, response.StatusCode >= 500, &statusError{status: response.StatusCode, message: errorMessage(answer)}
	}
	if out != nil && len(answer) > 0 {
		if err := json.Unmarshal(answer, out); err != nil {
			return false, false, fmt.Errorf("unexpected answer: %w", err)
		}
	}
	return true, false, nil
}

// errorMessage is the cloud's `{"error": "..."}`, or the start of the body.
func errorMessage(body []byte) string {
	var answer struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &answer) == nil && answer.Error != "" {
		return answer.Error
	}
	if len(body) > 200 {
		body = body[:200]
	}
	return string(body)
}
