package vfs

// SetFdHeld sets a function that runs while a write or sync holds its
// file's descriptor, before the system call.
func SetFdHeld(f func()) { fdHeld = f }
