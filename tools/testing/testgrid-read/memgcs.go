package main

// An in-memory gcs.ConditionalClient for --junit: TestGrid's updater reads and writes through the
// util/gcs interfaces only, so with this client the same updater code runs without any GCS server.
// It does what the updater asks of GCS: objects listed in name order under a prefix (with a
// delimiter, "directories" come back as Prefix entries; StartOffset is honoured), opened, stat'ed,
// uploaded and copied, with generation preconditions (DoesNotExist, GenerationMatch) on writes and
// reads.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"github.com/GoogleCloudPlatform/testgrid/util/gcs"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

type memObject struct {
	data       []byte
	generation int64
	updated    time.Time
}

type memStore struct {
	mu      sync.Mutex
	objects map[string]memObject // key: bucket + "/" + object
	gen     int64
}

type memClient struct {
	store     *memStore
	readCond  *storage.Conditions
	writeCond *storage.Conditions
}

var _ gcs.ConditionalClient = memClient{}

func newMemClient() memClient {
	return memClient{store: &memStore{objects: map[string]memObject{}}}
}

func key(p gcs.Path) string { return p.Bucket() + "/" + p.Object() }

func preconditionFailed() error {
	return &googleapi.Error{Code: http.StatusPreconditionFailed, Message: "precondition failed"}
}

func check(cond *storage.Conditions, obj memObject, exists bool) error {
	if cond == nil {
		return nil
	}
	switch {
	case cond.DoesNotExist && exists:
		return preconditionFailed()
	case cond.GenerationMatch > 0 && (!exists || cond.GenerationMatch != obj.generation):
		return preconditionFailed()
	case cond.GenerationNotMatch > 0 && exists && cond.GenerationNotMatch == obj.generation:
		return preconditionFailed()
	}
	return nil
}

func attrs(p gcs.Path, obj memObject) *storage.ObjectAttrs {
	return &storage.ObjectAttrs{
		Bucket:     p.Bucket(),
		Name:       p.Object(),
		Size:       int64(len(obj.data)),
		Generation: obj.generation,
		Created:    obj.updated,
		Updated:    obj.updated,
	}
}

func (c memClient) If(read, write *storage.Conditions) gcs.ConditionalClient {
	return memClient{store: c.store, readCond: read, writeCond: write}
}

func (c memClient) put(p gcs.Path, data []byte) (*storage.ObjectAttrs, error) {
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	old, exists := c.store.objects[key(p)]
	if err := check(c.writeCond, old, exists); err != nil {
		return nil, err
	}
	c.store.gen++
	obj := memObject{data: append([]byte(nil), data...), generation: c.store.gen, updated: time.Now()}
	c.store.objects[key(p)] = obj
	return attrs(p, obj), nil
}

func (c memClient) get(p gcs.Path) (memObject, error) {
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	obj, exists := c.store.objects[key(p)]
	if !exists {
		return obj, storage.ErrObjectNotExist
	}
	return obj, check(c.readCond, obj, exists)
}

func (c memClient) Upload(_ context.Context, p gcs.Path, buf []byte, _ bool, _ string) (*storage.ObjectAttrs, error) {
	return c.put(p, buf)
}

func (c memClient) Copy(_ context.Context, from, to gcs.Path) (*storage.ObjectAttrs, error) {
	obj, err := c.get(from)
	if err != nil {
		return nil, err
	}
	return c.put(to, obj.data)
}

func (c memClient) Open(_ context.Context, p gcs.Path) (io.ReadCloser, *storage.ReaderObjectAttrs, error) {
	obj, err := c.get(p)
	if err != nil {
		return nil, nil, err
	}
	ra := &storage.ReaderObjectAttrs{Size: int64(len(obj.data)), Generation: obj.generation, LastModified: obj.updated}
	return io.NopCloser(bytes.NewReader(obj.data)), ra, nil
}

func (c memClient) Stat(_ context.Context, p gcs.Path) (*storage.ObjectAttrs, error) {
	obj, err := c.get(p)
	if err != nil {
		return nil, err
	}
	return attrs(p, obj), nil
}

// Objects lists as GCS does for Query{Prefix: <object>/, Delimiter, StartOffset}.
func (c memClient) Objects(_ context.Context, p gcs.Path, delimiter, startOffset string) gcs.Iterator {
	prefix := p.Object()
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	bucket := p.Bucket() + "/"
	c.store.mu.Lock()
	var names []string
	for k := range c.store.objects {
		if name, ok := strings.CutPrefix(k, bucket); ok && strings.HasPrefix(name, prefix) && name >= startOffset {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []*storage.ObjectAttrs
	seen := map[string]bool{}
	for _, name := range names {
		rest := name[len(prefix):]
		if i := strings.Index(rest, delimiter); delimiter != "" && i >= 0 {
			dir := prefix + rest[:i+len(delimiter)]
			if !seen[dir] {
				seen[dir] = true
				out = append(out, &storage.ObjectAttrs{Prefix: dir})
			}
			continue
		}
		obj := c.store.objects[bucket+name]
		out = append(out, &storage.ObjectAttrs{
			Bucket: p.Bucket(), Name: name, Size: int64(len(obj.data)), Generation: obj.generation,
			Created: obj.updated, Updated: obj.updated,
		})
	}
	c.store.mu.Unlock()
	return &memIterator{items: out}
}

type memIterator struct {
	items []*storage.ObjectAttrs
}

func (it *memIterator) Next() (*storage.ObjectAttrs, error) {
	if len(it.items) == 0 {
		return nil, iterator.Done
	}
	next := it.items[0]
	it.items = it.items[1:]
	return next, nil
}
