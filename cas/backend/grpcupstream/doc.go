// Package grpcupstream is a tier.Backend on an upstream REAPI cache:
// another membuf, bb-storage, bazel-remote, NativeLink or BuildBuddy,
// reached at grpc://HOST:PORT[/INSTANCE] or grpcs://... (ParseURL), over
// one gRPC connection, with TLS, a client certificate and basic auth from
// files the URL names.
//
// How each tier.Backend method maps onto REAPI:
//   - Get: a blob by ByteStream Read from the offset (received with
//     grpcmem's codec, no copy of its own until the caller's Read), an
//     action result by GetActionResult, marshalled deterministically;
//     Object.SHA256 is tier.Unchecked (the upstream checks what it
//     stores);
//   - Put: small blobs together by BatchUpdateBlobs (a blob is small if
//     16 fit in the upstream's max_batch_total_size_bytes), large ones by
//     ByteStream Write (a fresh UUID each; an early answer with the
//     committed size is success), action results by UpdateActionResult;
//   - Stat: FindMissingBlobs, one request for up to 10,000 blobs; a blob
//     named by its hash alone answers -1;
//   - Probe: GetCapabilities (SHA-256 and action-cache updates required),
//     then a read and a write of the empty blob and a read of an action
//     result, so that refused credentials show at start.
//
// The instance name is the URL's: the tier has no client's to pass on.
// An action result is keyed by its action's digest, hash and size, as
// tier.Key names it (bb-storage keys its action cache by both).
//
// It imports cas, cas/tier, cas/actionresult and the backends' internal
// upstream package; nothing of the server.
package grpcupstream
