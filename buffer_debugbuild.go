//go:build !membuf_nodebug

package membuf

// buffersDebugBuilt is false only in builds with the membuf_nodebug tag,
// which exist to measure what the debug-mode check costs buffers when debug
// mode is off (docs/benchmarks.md, "Debug mode off"): with it false the compiler removes
// the check entirely. Ordinary builds keep it true.
const buffersDebugBuilt = true
