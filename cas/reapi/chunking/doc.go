// Package chunking serves blob splitting and splicing, the CAS service's
// GetChunkMapping, SplitBlob, RegisterChunkMapping and SpliceBlob
// (docs/chunking.md): a stored blob is cut with FastCDC 2020 ([Params],
// package fastcdc) into chunks stored as blobs of their own, and a blob is
// stored from chunks the client already uploaded, checked against its
// digest. Mappings are recorded in the action cache for the next request.
//
// reapi's CAS service hands those four RPCs to a [Service]; it imports
// cas, access, fastcdc and reapi's internal rpcstatus, never reapi itself
// nor a Storage implementation.
package chunking
