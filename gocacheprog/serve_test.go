package gocacheprog_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/membuf/membuf/gocacheprog"
)

// TestServe speaks to Serve as go does: it announces its commands, keeps
// a put, answers a get with its DiskPath, misses the rest, and answers
// close last.
func TestServe(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := openCache(t, gocacheprog.Options{})
	done := make(chan error, 1)
	go func() { done <- gocacheprog.Serve(context.Background(), inR, outW, c); outW.Close() }()
	responses := json.NewDecoder(outR)
	next := func() gocacheprog.Response {
		t.Helper()
		var res gocacheprog.Response
		if err := responses.Decode(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	if hello := next(); hello.ID != 0 || len(hello.KnownCommands) != 3 {
		t.Fatalf("first response %+v, want the known commands", hello)
	}
	w := bufio.NewWriter(inW)
	body := []byte("an object file")
	writeGoRequest(w, goRequest{ID: 1, Command: "put", ActionID: actionID("a"), OutputID: outputID(body), BodySize: int64(len(body))}, body)
	put := next()
	if put.ID != 1 || put.Err != "" || put.DiskPath == "" {
		t.Fatalf("put: %+v", put)
	}
	writeGoRequest(w, goRequest{ID: 2, Command: "get", ActionID: actionID("a")}, nil)
	writeGoRequest(w, goRequest{ID: 3, Command: "get", ActionID: actionID("b")}, nil)
	got := map[int64]gocacheprog.Response{}
	for range 2 {
		res := next()
		got[res.ID] = res
	}
	if hit := got[2]; hit.Miss || !bytes.Equal(hit.OutputID, outputID(body)) || hit.Size != int64(len(body)) || hit.DiskPath != put.DiskPath || hit.Time == nil {
		t.Errorf("get of what was put: %+v", hit)
	}
	if b, err := os.ReadFile(got[2].DiskPath); err != nil || !bytes.Equal(b, body) {
		t.Errorf("the DiskPath holds %q, %v", b, err)
	}
	if miss := got[3]; !miss.Miss {
		t.Errorf("get of what nobody put: %+v", miss)
	}
	// A put whose body does not hash to its output ID gets an error, and
	// the stream goes on.
	writeGoRequest(w, goRequest{ID: 4, Command: "put", ActionID: actionID("c"), OutputID: outputID([]byte("other")), BodySize: int64(len(body))}, body)
	if res := next(); res.ID != 4 || res.Err == "" {
		t.Errorf("a put with the wrong output ID: %+v", res)
	}
	writeGoRequest(w, goRequest{ID: 5, Command: "close"}, nil)
	if res := next(); res.ID != 5 || res.Err != "" {
		t.Errorf("close: %+v", res)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	inW.Close()
}

// A stream that breaks the protocol ends Serve with an error.
func TestServeEndsOnBadRequest(t *testing.T) {
	c := openCache(t, gocacheprog.Options{})
	err := gocacheprog.Serve(context.Background(), bytes.NewReader([]byte("{\"ID\":1,\"Command\":\"frobnicate\"}\n")), io.Discard, c)
	if err == nil {
		t.Fatal("Serve accepted an unknown command")
	}
}
