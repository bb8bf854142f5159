// Package grpcmemtest helps test ByteStream servers that use grpcmem.
package grpcmemtest

import (
	"bytes"
	"context"
	"sync"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/grpcmem"
	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/stats"
)

// ChunkHolder is a grpc-go stats.Handler (grpc.StatsHandler) that holds on
// to the chunks of the ByteStream Read responses a server sends, the way
// grpc-go's stats package allows, and checks, when it lets each go, that its
// bytes have not changed since it was sent. It is the case that makes
// reusing a chunk's memory after Send unsafe (bb-storage PR 339 without
// PreparedMsg): a server that honours grpc-go's SendMsg contract passes.
//
// For a *grpcmem.ReadResponse it takes a reference of its own while
// HandleRPC runs (stats.OutPayload: "must be copied if needed later"; for a
// membuf chunk, Ref is the copy), and frees it when it lets the chunk go.
// For a generated *bytestream.ReadResponse (the proto codec's path, which
// must give every message memory of its own) it keeps the slice itself.
// With each it keeps a copy of the bytes as sent. It lets a chunk go once
// it holds more than Hold of the RPC's, oldest first, and the rest when the
// RPC ends.
//
// It also keeps every *grpcmem.ReadResponse the server sent, without a
// reference ([ChunkHolder.Sent]): what a handler that ignores the contract
// would keep.
type ChunkHolder struct {
	hold int

	mu        sync.Mutex
	held      map[*int][]heldChunk // by RPC
	checked   int
	corrupted int
	sent      []*grpcmem.ReadResponse
}

type heldChunk struct {
	buf  membuf.Buffer // the zero Buffer for a generated message's slice
	data []byte        // the bytes held
	want []byte        // a copy of them as sent
}

// NewChunkHolder returns a ChunkHolder that holds up to hold chunks per RPC.
func NewChunkHolder(hold int) *ChunkHolder {
	return &ChunkHolder{hold: hold, held: map[*int][]heldChunk{}}
}

// Counts returns how many chunks h has let go and checked so far, and how
// many of those had changed since they were sent.
func (h *ChunkHolder) Counts() (checked, corrupted int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.checked, h.corrupted
}

// Sent returns every *grpcmem.ReadResponse the server has sent, in order.
// h holds no reference to their Data: reading it after the send panics with
// membuf's use-after-free message once gRPC has freed the chunk.
func (h *ChunkHolder) Sent() []*grpcmem.ReadResponse {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*grpcmem.ReadResponse(nil), h.sent...)
}

// TagRPC gives each RPC a key of its own.
func (h *ChunkHolder) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, h, new(int))
}

// HandleRPC holds the chunk of each Read response the server sends, and
// lets an RPC's chunks go when it ends.
func (h *ChunkHolder) HandleRPC(ctx context.Context, s stats.RPCStats) {
	k, _ := ctx.Value(h).(*int)
	switch s := s.(type) {
	case *stats.OutPayload:
		if s.Client {
			return
		}
		var c heldChunk
		var sent *grpcmem.ReadResponse
		switch m := s.Payload.(type) {
		case *grpcmem.ReadResponse:
			m.Data.Ref() // SendMsg still holds its reference while this runs
			c = heldChunk{buf: m.Data, data: m.Data.Bytes()}
			sent = m
		case *bytestream.ReadResponse:
			c = heldChunk{data: m.Data}
		default:
			return
		}
		c.want = bytes.Clone(c.data)
		h.mu.Lock()
		defer h.mu.Unlock()
		if sent != nil {
			h.sent = append(h.sent, sent)
		}
		h.held[k] = append(h.held[k], c)
		if len(h.held[k]) > h.hold {
			h.release(h.held[k][0])
			h.held[k] = h.held[k][1:]
		}
	case *stats.End:
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.held[k] {
			h.release(c)
		}
		delete(h.held, k)
	}
}

// release checks c and drops it; h.mu is held.
func (h *ChunkHolder) release(c heldChunk) {
	h.checked++
	if !bytes.Equal(c.data, c.want) {
		h.corrupted++
	}
	c.buf.Free() // does nothing for the zero Buffer
}

// TagConn returns ctx.
func (h *ChunkHolder) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

// HandleConn does nothing.
func (h *ChunkHolder) HandleConn(context.Context, stats.ConnStats) {}
