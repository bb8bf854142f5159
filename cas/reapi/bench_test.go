package reapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	bspb "google.golang.org/genproto/googleapis/bytestream"
)

// BenchmarkRead reads a 4 MiB blob over loopback gRPC, with chunk buffers
// allocated plainly and from a membuf.Pool, so the two show side by side:
//
//	go test -run XXX -bench BenchmarkRead -benchmem -count 6 ./cas/reapi
func BenchmarkRead(b *testing.B) {
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		pool membuf.BufferPool
	}{{"plain", nil}, {"membuf.Pool", pool}} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b, 0, Options{Pool: bc.pool})
			data := testblob.Pattern(4<<20, 1)
			d := cas.DigestOf(data)
			if err := cas.Put(context.Background(), e.store, d, data, cas.Uncompressed); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				stream, err := e.bs.Read(context.Background(), &bspb.ReadRequest{ResourceName: readName(d)})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					resp, err := stream.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n += len(resp.Data)
				}
				if n != len(data) {
					b.Fatal(fmt.Sprint("read ", n, " bytes"))
				}
			}
		})
	}
}

// BenchmarkFetchBlob stores a new 16 MiB blob per iteration, two ways: a
// ByteStream upload of it (1 MiB messages, as the REAPI SDK sends), and a
// FetchBlob with its sha256 checksum.sri that downloads it from a loopback
// origin. Client, origin and server share the process, so MB/s compares
// what a client gets on one machine.
// TMPDIR picks the store's filesystem:
//
//	TMPDIR=/dev/shm go test -run XXX -bench BenchmarkFetchBlob -benchmem -benchtime 30x -count 8 ./cas/reapi | tee fetch.txt
//	benchstat -col /path fetch.txt
func BenchmarkFetchBlob(b *testing.B) {
	const size = 16 << 20
	base := testblob.Random(size, 3)
	// blob n is base with its last 8 bytes replaced by n: a new blob each
	// iteration, its digest from the SHA-256 state saved after the prefix.
	prefix := sha256.New()
	prefix.Write(base[:size-8])
	state, err := prefix.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	tail := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }
	digest := func(n uint64) cas.Digest {
		h := sha256.New()
		h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state)
		h.Write(tail(n))
		return cas.Digest{Hash: hex.EncodeToString(h.Sum(nil)), Size: size}
	}
	data := bytes.Clone(base) // the upload's: its tail changes per blob
	var seq atomic.Uint64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseUint(strings.TrimPrefix(r.URL.Path, "/"), 10, 64)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(base[:size-8])
		w.Write(tail(n))
	}))
	defer origin.Close()
	host := strings.TrimPrefix(origin.URL, "http://")

	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("path=bytestream-upload", func(b *testing.B) {
		e := newEnv(b, 0, Options{Pool: pool})
		b.SetBytes(size)
		for b.Loop() {
			n := seq.Add(1)
			copy(data[size-8:], tail(n))
			if _, err := e.write(writeName(fmt.Sprint("u", n), digest(n)), data, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("path=fetchblob", func(b *testing.B) {
		e := newEnv(b, 0, Options{Pool: pool, AssetHosts: []string{host}})
		fetch := rapb.NewFetchClient(e.conn)
		b.SetBytes(size)
		for b.Loop() {
			n := seq.Add(1)
			raw, _ := hex.DecodeString(digest(n).Hash)
			resp, err := fetch.FetchBlob(context.Background(), &rapb.FetchBlobRequest{
				Uris:       []string{fmt.Sprintf("%s/%d", origin.URL, n)},
				Qualifiers: []*rapb.Qualifier{{Name: "checksum.sri", Value: "sha256-" + base64.StdEncoding.EncodeToString(raw)}},
			})
			if err != nil || resp.GetStatus().GetCode() != 0 {
				b.Fatalf("FetchBlob: %v %v", err, resp.GetStatus())
			}
		}
	})
}
