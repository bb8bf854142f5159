package cas

// Lookup says whose question a lookup (FindMissing, GetActionResult) is,
// and so what a store and its decorators do with it. It is an argument of
// those methods, so that a decorator passes it down unchanged and every
// call states it.
type Lookup uint8

const (
	// ClientLookup is a client's lookup: counted as a hit or a miss
	// (decorator.LookupCounter, a tier's statistics), and answered as
	// fully as the store can (a tier asks its slower tier about what it
	// lacks).
	ClientLookup Lookup = iota
	// ServerCheck is the server's own check whose answer a client relies
	// on (are an action result's outputs present? is a keyed entry there
	// already?): counted nowhere, so that hits and misses measure
	// clients, and answered as a ClientLookup is (a tier trusts its
	// slower tier's remembered "yes" for a shorter time).
	ServerCheck
	// QuickCheck is the server's own check whose answer is only an
	// optimisation (is this upload already stored, so that the rest of it
	// need not be received?): counted nowhere, as ServerCheck, and a store
	// with a slower tier may answer it from what it holds and remembers,
	// asking the slower tier nothing (the tier's FindMissing does). A
	// wrong "missing" costs a redundant upload, never a wrong answer to a
	// client.
	QuickCheck
)

// Counted reports whether l is a client's lookup, the one kind a
// decorator or a store that counts lookups counts.
func (l Lookup) Counted() bool { return l == ClientLookup }

func (l Lookup) String() string {
	switch l {
	case ClientLookup:
		return "client"
	case ServerCheck:
		return "server"
	case QuickCheck:
		return "quick"
	}
	return "unknown"
}
