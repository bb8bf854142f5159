// Package depspin pins module requirements while the packages that use them
// are being written. It is removed once they exist.
package depspin
