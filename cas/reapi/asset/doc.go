// Package asset serves the Remote Asset API's Fetch and Push
// (build.bazel.remote.asset.v1; docs/remoteasset.md) over a [cas.Storage]:
// FetchBlob answers from the CAS, from associations of URIs with blobs
// (kept in the action cache), or by downloading from an allowed host,
// checking every checksum.sri before anything is stored; PushBlob records
// associations. FetchDirectory and PushDirectory are UNIMPLEMENTED.
//
// reapi.Server makes the [Service] and registers it beside the REAPI's
// services, giving it its upload budget (downloads are held under it),
// its access control and its errors' mapping to gRPC codes
// (reapi/internal/rpcstatus). It imports cas, access and reapi's internal
// packages, never reapi itself nor a Storage implementation.
package asset
