// Package ages measures how old the disk store's entries are when it
// evicts them: a Clock that maps the store's recency counter (a tick per
// use) to wall time, and a Recorder of the ages evicted (a histogram, and
// the youngest of the last hour). A cache that evicts entries younger
// than its clients assume they live (Bazel's lease: three hours) breaks
// builds without the bytes; these are what tell an operator so.
//
// It imports nothing of the cache; the store holds its lock around both.
package ages
