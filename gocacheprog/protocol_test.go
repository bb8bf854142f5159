package gocacheprog_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/membuf/membuf/gocacheprog"
)

// goRequest is a request as go's cmd/go/internal/cacheprog.Request
// marshals it.
type goRequest struct {
	ID       int64
	Command  string
	ActionID []byte `json:",omitempty"`
	OutputID []byte `json:",omitempty"`
	BodySize int64  `json:",omitempty"`
}

// writeGoRequest writes req and body as go's ProgCache.send does: the
// JSON (json.Encoder: a newline), another newline, and a body as a quoted
// base64 string and a newline.
func writeGoRequest(w *bufio.Writer, req goRequest, body []byte) {
	json.NewEncoder(w).Encode(req)
	w.WriteByte('\n')
	if len(body) > 0 {
		w.WriteByte('"')
		e := base64.NewEncoder(base64.StdEncoding, w)
		e.Write(body)
		e.Close()
		w.WriteString("\"\n")
	}
	w.Flush()
}

func actionID(s string) []byte {
	sum := sha256.Sum256([]byte("action " + s))
	return sum[:]
}

func outputID(body []byte) []byte {
	sum := sha256.Sum256(body)
	return sum[:]
}

func TestRequestReaderReadsWhatGoWrites(t *testing.T) {
	var in bytes.Buffer
	w := bufio.NewWriter(&in)
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // longer than the reader's buffer
	reqs := []struct {
		req  goRequest
		body []byte
	}{
		{goRequest{ID: 1, Command: "get", ActionID: actionID("a")}, nil},
		{goRequest{ID: 2, Command: "put", ActionID: actionID("b"), OutputID: outputID([]byte("hello")), BodySize: 5}, []byte("hello")},
		{goRequest{ID: 3, Command: "put", ActionID: actionID("c"), OutputID: outputID(nil)}, nil},
		{goRequest{ID: 4, Command: "put", ActionID: actionID("d"), OutputID: outputID(big), BodySize: int64(len(big))}, big},
		{goRequest{ID: 5, Command: "close"}, nil},
	}
	for _, r := range reqs {
		writeGoRequest(w, r.req, r.body)
	}
	rr := gocacheprog.NewRequestReader(&in)
	for _, want := range reqs {
		got, err := rr.Next()
		if err != nil {
			t.Fatalf("request %d: %v", want.req.ID, err)
		}
		if got.ID != want.req.ID || string(got.Command) != want.req.Command || got.BodySize != want.req.BodySize {
			t.Errorf("request %d: got %+v, want %+v", want.req.ID, got, want.req)
		}
		if want.req.ActionID != nil && !bytes.Equal(got.ActionID[:], want.req.ActionID) {
			t.Errorf("request %d: action ID %s, want %x", want.req.ID, got.ActionID, want.req.ActionID)
		}
		if want.req.OutputID != nil && !bytes.Equal(got.OutputID[:], want.req.OutputID) {
			t.Errorf("request %d: output ID %s, want %x", want.req.ID, got.OutputID, want.req.OutputID)
		}
		if got.Command == gocacheprog.CommandPut {
			var body bytes.Buffer
			if _, err := rr.Body(&body); err != nil {
				t.Fatalf("request %d's body: %v", want.req.ID, err)
			}
			if !bytes.Equal(body.Bytes(), want.body) {
				t.Errorf("request %d's body: %d bytes, not the %d sent", want.req.ID, body.Len(), len(want.body))
			}
		}
	}
	if _, err := rr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last request: %v, want io.EOF", err)
	}
}

func TestRequestReaderRefuses(t *testing.T) {
	aid := base64.StdEncoding.EncodeToString(actionID("x"))
	oid := base64.StdEncoding.EncodeToString(outputID([]byte("abc")))
	put := `{"ID":1,"Command":"put","ActionID":"` + aid + `","OutputID":"` + oid + `","BodySize":3}` + "\n\n"
	for name, in := range map[string]string{
		"not json":         "hello\n",
		"unknown command":  `{"ID":1,"Command":"delete","ActionID":"` + aid + `"}` + "\n",
		"short action ID":  `{"ID":1,"Command":"get","ActionID":"AAAA"}` + "\n",
		"get with a body":  `{"ID":1,"Command":"get","ActionID":"` + aid + `","BodySize":3}` + "\n",
		"put without ID":   `{"ID":1,"Command":"put","ActionID":"` + aid + `","BodySize":3}` + "\n",
		"negative size":    `{"ID":1,"Command":"put","ActionID":"` + aid + `","OutputID":"` + oid + `","BodySize":-1}` + "\n",
		"long line":        `{"ID":1,"Command":"get","ActionID":"` + strings.Repeat("A", 70000) + `"}` + "\n",
		"body not string":  put + "YWJj\n",
		"body too short":   put + `"YWI="` + "\n",
		"body too long":    put + `"YWJjZA=="` + "\n",
		"body not base64":  put + `"Y*Jj"` + "\n",
		"body escaped":     put + `"YW\u004ajZA"` + "\n",
		"body unended":     put + `"YWJj`,
		"body missing":     put,
		"body not read":    put + `"YWJj"` + "\n" + `{"ID":2,"Command":"close"}`,
		"close with body":  `{"ID":1,"Command":"close","BodySize":3}` + "\n",
		"truncated object": `{"ID":1,"Command":"get","Act`,
	} {
		t.Run(name, func(t *testing.T) {
			rr := gocacheprog.NewRequestReader(strings.NewReader(in))
			req, err := rr.Next()
			if err == nil && req.Command == gocacheprog.CommandPut && name != "body not read" {
				_, err = rr.Body(io.Discard)
			}
			if err == nil {
				_, err = rr.Next()
			}
			if err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("%q: accepted (%v), want an error", in, err)
			}
		})
	}
}

// FuzzRequestReader reads whatever go (or anything else) may write on the
// program's stdin. It never panics, never reads a body other than the
// size announced, and a request it accepts reads back the same when
// written again as go writes it. The seeds are in
// testdata/fuzz/FuzzRequestReader.
func FuzzRequestReader(f *testing.F) {
	var seed bytes.Buffer
	w := bufio.NewWriter(&seed)
	writeGoRequest(w, goRequest{ID: 1, Command: "get", ActionID: actionID("a")}, nil)
	writeGoRequest(w, goRequest{ID: 2, Command: "put", ActionID: actionID("b"), OutputID: outputID([]byte("hello")), BodySize: 5}, []byte("hello"))
	writeGoRequest(w, goRequest{ID: 3, Command: "close"}, nil)
	f.Add(seed.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		rr := gocacheprog.NewRequestReader(bytes.NewReader(in))
		for range 100 {
			req, err := rr.Next()
			if err != nil {
				return
			}
			var body bytes.Buffer
			if req.Command == gocacheprog.CommandPut {
				n, err := rr.Body(&body)
				if err != nil {
					return
				}
				if n != req.BodySize || int64(body.Len()) != req.BodySize {
					t.Fatalf("a body of %d bytes (%d written) for an announced %d", n, body.Len(), req.BodySize)
				}
			}
			// Written again as go writes it, it reads back the same.
			var again bytes.Buffer
			aw := bufio.NewWriter(&again)
			gr := goRequest{ID: req.ID, Command: string(req.Command), BodySize: req.BodySize}
			if req.Command != gocacheprog.CommandClose {
				gr.ActionID = req.ActionID[:]
			}
			if req.Command == gocacheprog.CommandPut {
				gr.OutputID = req.OutputID[:]
			}
			writeGoRequest(aw, gr, body.Bytes())
			rr2 := gocacheprog.NewRequestReader(&again)
			req2, err := rr2.Next()
			if err != nil || req2 != req {
				t.Fatalf("%+v written again reads back %+v, %v", req, req2, err)
			}
			if req.Command == gocacheprog.CommandPut {
				var body2 bytes.Buffer
				if _, err := rr2.Body(&body2); err != nil || !bytes.Equal(body2.Bytes(), body.Bytes()) {
					t.Fatalf("the body written again reads back differently: %v", err)
				}
			}
		}
	})
}
