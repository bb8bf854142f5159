// Package interop tests the membuf binary against clients nobody in this
// project wrote: the REAPI Go SDK. It is a module of its own so that the SDK's
// dependencies (older gRPC among them) stay out of the main module.
package interop
