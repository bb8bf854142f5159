package upstream

import "time"

// Defaults of the backends' Config fields left zero, and their bounds.
const (
	// DefaultRequestTimeout bounds a request's wait for an answer or for
	// progress (Stall).
	DefaultRequestTimeout = 30 * time.Second
	// DefaultConcurrency is how many requests one Stat or Put keeps in
	// flight.
	DefaultConcurrency = 16
	// MaxActionResultSize bounds the bytes read of an action result, in
	// either direction: a few hundred bytes is usual.
	MaxActionResultSize = 64 << 20
)

// EmptyHash is the SHA-256 of no bytes, in hex: the empty blob, which
// every cache holds (or takes), and what a probe asks about.
const EmptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
