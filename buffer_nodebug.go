//go:build membuf_nodebug

package membuf

// See buffer_debugbuild.go.
const buffersDebugBuilt = false
