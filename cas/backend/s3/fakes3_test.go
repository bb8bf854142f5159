package s3

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/membuf/membuf/cas"
)

// fakeS3 is an in-process S3 endpoint for unit tests: path-style GetObject,
// HeadObject, PutObject and HeadBucket on one bucket, enough for this
// package, with faults to switch on. It does not check signatures. Like a
// real store it refuses a put whose x-amz-checksum-sha256 or
// x-amz-content-sha256 does not match the body. The end-to-end tests run
// against a real MinIO instead (minio_test.go).
type fakeS3 struct {
	srv    *httptest.Server
	bucket string

	mu      sync.Mutex
	objects map[string]fakeObject

	requests sync.Map // method -> *atomic.Int64

	// Faults.
	down      atomic.Bool                   // every request answers 503
	cutAfter  atomic.Int64                  // > 0: GET bodies stop after this many bytes, the connection closed
	corrupt   atomic.Bool                   // GET bodies have their first byte changed
	stall     atomic.Bool                   // requests hang (until the client gives up) ...
	stallBody atomic.Bool                   // ... or GET bodies hang after half the object
	gate      atomic.Pointer[chan struct{}] // GETs wait until it is closed
}

type fakeObject struct {
	data   []byte
	sha256 string // x-amz-meta-sha256, if set
}

func newFakeS3(t *testing.T) *fakeS3 {
	f := &fakeS3{bucket: "membuf-test", objects: make(map[string]fakeObject)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// location is the bucket's Location, with prefix.
func (f *fakeS3) location(prefix string) Location {
	loc, err := ParseURL("s3://" + f.bucket + "/" + prefix + "?endpoint=" + f.srv.URL + "&region=us-east-1")
	if err != nil {
		panic(err)
	}
	return loc
}

// count returns the object requests (GET, HEAD, PUT) received, or with
// " bucket" after the method, the bucket requests.
func (f *fakeS3) count(method string) int64 {
	v, _ := f.requests.LoadOrStore(method, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func (f *fakeS3) object(key string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[key]
	return o.data, ok
}

func (f *fakeS3) putObject(key string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[key] = fakeObject{data: data}
}

// putBlob stores blobOf(n, seed) in the bucket as a CAS object, as a node
// uploads it, and returns it with its digest.
func (f *fakeS3) putBlob(n int, seed byte) ([]byte, cas.Digest) {
	data := blobOf(n, seed)
	d := cas.DigestOf(data)
	f.putObject("cas/"+d.Hash, data)
	return data, d
}

// fakeNode is a node on a fresh fake bucket, with AWS's configuration
// isolated to static test credentials and fast retries.
func fakeNode(t *testing.T) (*fakeS3, *node) {
	t.Helper()
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	return s3, startNode(t, "", s3.location(""), fastRetries)
}

func (f *fakeS3) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	counted := r.Method // object requests by method; bucket requests and the start's probe apart
	switch {
	case key == "":
		counted += " bucket"
	case strings.HasSuffix(key, strings.Repeat("0", 64)): // the key bucket.probe asks for
		counted += " probe"
	}
	v, _ := f.requests.LoadOrStore(counted, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	if f.down.Load() {
		http.Error(w, "<Error><Code>ServiceUnavailable</Code></Error>", http.StatusServiceUnavailable)
		return
	}
	if f.stall.Load() {
		// Read the body first: an HTTP/1.1 server notices a client that
		// gives up (and cancels r's context) only once it has read the
		// request whole.
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		return
	}
	if bucket != f.bucket {
		http.Error(w, "<Error><Code>NoSuchBucket</Code></Error>", http.StatusNotFound)
		return
	}
	if key == "" {
		w.WriteHeader(http.StatusOK) // HeadBucket
		return
	}
	switch r.Method {
	case http.MethodPut:
		data, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256(data)
		if c := r.Header.Get("X-Amz-Checksum-Sha256"); c != "" && c != base64.StdEncoding.EncodeToString(sum[:]) {
			http.Error(w, "<Error><Code>BadDigest</Code></Error>", http.StatusBadRequest)
			return
		}
		if c := r.Header.Get("X-Amz-Content-Sha256"); c != "" && !strings.HasPrefix(c, "UNSIGNED") && c != hex.EncodeToString(sum[:]) {
			http.Error(w, "<Error><Code>XAmzContentSHA256Mismatch</Code></Error>", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.objects[key] = fakeObject{data: data, sha256: r.Header.Get("X-Amz-Meta-Sha256")}
		f.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	case http.MethodGet, http.MethodHead:
		f.mu.Lock()
		o, ok := f.objects[key]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			if r.Method == http.MethodGet {
				io.WriteString(w, "<Error><Code>NoSuchKey</Code></Error>")
			}
			return
		}
		if g := f.gate.Load(); g != nil && r.Method == http.MethodGet {
			select {
			case <-*g:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(o.data)))
		if o.sha256 != "" {
			w.Header().Set("X-Amz-Meta-Sha256", o.sha256)
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		data := o.data
		if f.corrupt.Load() && len(data) > 0 {
			data = append([]byte{data[0] ^ 0xff}, data[1:]...)
		}
		if n := f.cutAfter.Load(); n > 0 && int(n) < len(data) {
			w.Write(data[:n])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // closes the connection mid-body
		}
		if f.stallBody.Load() {
			w.Write(data[:len(data)/2])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Write(data)
	default:
		http.Error(w, "not implemented by the fake", http.StatusNotImplemented)
	}
}
