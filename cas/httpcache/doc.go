// Package httpcache serves a [cas.Storage] as the HTTP/1.1 cache protocol
// that Bazel (--remote_cache=http://…), ccache (remote_storage with
// layout=bazel) and bazel-remote speak: GET, HEAD and PUT of /cas/{sha256}
// and /ac/{sha256}, each optionally under an instance prefix
// (/{instance}/cas/{sha256}), which, as on gRPC, names no separate
// namespace.
//
// Any other path, /{namespace}/{key}, names a keyed entry: what sccache
// (its WebDAV storage: GET, HEAD, PUT, PROPFIND, MKCOL) and Gradle's HTTP
// build cache (GET, PUT) keep under a key they choose rather than the
// content's hash. An entry is a small record in the action cache's side of
// the store naming a CAS blob, so its reads are checked reads and equal
// content is kept once (keyedpath.go, keyed.go, webdav.go). Two such
// paths are gocached's, go's build cache (GET /action/{actionID}, PUT
// /{actionID}/{outputID}): an action result naming the output as a CAS
// blob, as a REAPI client of go's keeps it (gocached.go).
//
// Two tools' own protocols are keyed entries too, in namespaces of their
// own that the generic keyed path refuses: Turborepo's /v8/artifacts...
// (turbo.go: its signature tag kept with the entry) and Nx's
// /v1/cache/{hash} (nx.go). Their entries are written once: a PUT of a
// stored entry is 409 and changes nothing. Maven's build cache extension
// needs nothing of its own: its remote cache is a keyed namespace
// (/maven/). A bearer token is user:password (access.Control).
//
// It sits beside reapi over the same Storage, with the same rules:
//   - access: the same access.Control, its credentials from the
//     Authorization header (Basic) or the client certificate; a refused
//     anonymous caller is asked for credentials (401), a refused
//     authenticated one is forbidden (403);
//   - integrity: a PUT to /cas/ is hashed as it arrives and stored only if
//     it matches the name; a GET reads through the store's checked reads,
//     so no response completes with wrong bytes (a failure after the
//     status line cuts the connection, which the client sees as a short
//     body);
//   - keyed entries: read and written as the action cache is (its access
//     rules), their content hashed as it arrives and stored as a blob;
//   - action results: a PUT to /ac/ must be an ActionResult that
//     actionresult.Check accepts, and a GET serves one only if
//     actionresult.Load would, unless Options.RawActionCache keeps and
//     serves /ac/ entries as opaque bytes (ccache's own format);
//   - memory: reads go out in pooled chunks, and PUT bodies are taken
//     under the upload budget that bounds ByteStream writes.
//
// Status codes: 200 (206 for a Range; 201 for MKCOL, 202 for Turborepo's PUT, 204 for a gocached PUT, 207 for PROPFIND), 400 for a bad name or content that
// does not match it, 401 and 403, 404 for a miss, 405 for another method,
// 408 for a PUT whose body stalled, 409 for a PUT of a write-once entry stored already, 411 for a PUT without a length, 413 for one larger than the store, 416
// for a range outside the blob, 503 when a tier is unavailable, 507 when
// the store is full of uploads in progress.
package httpcache
