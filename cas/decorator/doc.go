// Package decorator holds what is cross-cutting about a store, each a
// small type around a cas.Storage (or one of its halves) that passes
// every other call through: counting clients' lookups (LookupCounter),
// refusing blobs over a size limit (SizeLimit), and missing action
// results past an age limit (ActionResultExpiry). The server composes
// them around its store in one place, from its configuration; the stores
// themselves know none of it.
//
// It imports cas only.
package decorator
