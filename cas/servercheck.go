package cas

import "context"

// serverCheckKey marks a context whose lookups are the server's own.
type serverCheckKey struct{}

// ServerCheck returns ctx marked as the server's own check (are an action
// result's outputs present? was an upload completed by another stream
// meanwhile?), not a client's lookup: a decorator that counts lookups
// leaves it out, so that hits and misses measure clients. Stores do not
// look at it.
func ServerCheck(ctx context.Context) context.Context {
	return context.WithValue(ctx, serverCheckKey{}, true)
}

// IsServerCheck reports whether ctx was marked by ServerCheck.
func IsServerCheck(ctx context.Context) bool {
	v, _ := ctx.Value(serverCheckKey{}).(bool)
	return v
}
