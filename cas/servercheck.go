package cas

import "context"

// checkKey marks a context whose lookups are the server's own; its value
// is a checkKind.
type checkKey struct{}

type checkKind uint8

const (
	serverCheck checkKind = 1 + iota // counted nowhere
	quickCheck                       // and answered from what the store holds at hand
)

// ServerCheck returns ctx marked as the server's own check (are an action
// result's outputs present?), not a client's lookup: a decorator that
// counts lookups leaves it out, so that hits and misses measure clients.
// Stores answer it as any lookup.
func ServerCheck(ctx context.Context) context.Context {
	if checkOf(ctx) != 0 {
		return ctx
	}
	return context.WithValue(ctx, checkKey{}, serverCheck)
}

// QuickCheck returns ctx marked as the server's own check whose answer is
// only an optimisation (is this upload already stored, so that the rest
// of it need not be received?): not counted, as ServerCheck, and a store
// with a slower tier answers it from what it holds and remembers,
// asking the slower tier nothing. A wrong "missing" costs a redundant
// upload, never a wrong answer to a client.
func QuickCheck(ctx context.Context) context.Context {
	if checkOf(ctx) == quickCheck {
		return ctx
	}
	return context.WithValue(ctx, checkKey{}, quickCheck)
}

// IsServerCheck reports whether ctx was marked by ServerCheck or
// QuickCheck.
func IsServerCheck(ctx context.Context) bool { return checkOf(ctx) != 0 }

// IsQuickCheck reports whether ctx was marked by QuickCheck.
func IsQuickCheck(ctx context.Context) bool { return checkOf(ctx) == quickCheck }

func checkOf(ctx context.Context) checkKind {
	k, _ := ctx.Value(checkKey{}).(checkKind)
	return k
}
