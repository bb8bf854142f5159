package gocacheprog_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
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

// Serve against a REAPI cache as go asks on an empty machine: each
// compiled package's output, many at once, and once it is answered its
// compiler output. Every answer is a hit whose DiskPath holds the right
// bytes, whether the fetch ahead had ended or was joined; every output
// is asked for once.
func TestServeFromARemoteWithFetchesAhead(t *testing.T) {
	f := &fakeREAPI{inline: true}
	c := openCache(t, gocacheprog.Options{Remote: newFakeREAPI(t, f)})
	const packages = 40
	want := map[int64][]byte{}
	for i := range packages {
		name := fmt.Sprint("compile ", i)
		body := []byte("!<arch>\n" + name)
		f.store(name, body)
		want[int64(2*i+1)] = body
		var stdout []byte
		if i%4 == 0 {
			stdout = []byte("a compiler warning")
		}
		f.storeID(stdoutKey(actionID(name)), stdout)
		want[int64(2*i+2)] = stdout
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- gocacheprog.Serve(context.Background(), inR, outW, c); outW.Close() }()
	responses := json.NewDecoder(outR)
	if err := responses.Decode(new(gocacheprog.Response)); err != nil { // the known commands
		t.Fatal(err)
	}
	w := bufio.NewWriter(inW)
	var writeMu sync.Mutex
	send := func(req goRequest) {
		writeMu.Lock()
		defer writeMu.Unlock()
		writeGoRequest(w, req, nil)
	}
	go func() {
		for i := range packages {
			send(goRequest{ID: int64(2*i + 1), Command: "get", ActionID: actionID(fmt.Sprint("compile ", i))})
		}
	}()
	for range 2 * packages {
		var res gocacheprog.Response
		if err := responses.Decode(&res); err != nil {
			t.Fatal(err)
		}
		body, ok := want[res.ID]
		if !ok {
			continue
		}
		if res.ID%2 == 1 {
			// As go does: a package's compiler output once its output
			// is answered.
			send(goRequest{ID: res.ID + 1, Command: "get", ActionID: stdoutKey(actionID(fmt.Sprint("compile ", res.ID/2)))})
		}
		if res.Miss || !bytes.Equal(res.OutputID, outputID(body)) || res.Size != int64(len(body)) {
			t.Errorf("get %d: %+v, want the output %q", res.ID, res, body)
			continue
		}
		if got, err := os.ReadFile(res.DiskPath); err != nil || !bytes.Equal(got, body) {
			t.Errorf("get %d: DiskPath holds %q, %v; want %q", res.ID, got, err, body)
		}
	}
	send(goRequest{ID: 2*packages + 1, Command: "close"})
	if err := responses.Decode(new(gocacheprog.Response)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	inW.Close()
	if n := f.rpcs.Load(); n != 2*packages {
		t.Errorf("%d RPCs for %d gets", n, 2*packages)
	}
	if n := c.Stats().FetchedAhead.Load(); n != packages {
		t.Errorf("%d compiler outputs fetched ahead, want %d", n, packages)
	}
}
