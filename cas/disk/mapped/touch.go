package mapped

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrFault is what Touch returns when fn faulted reading a mapping: the
// disk failed to read a page, or the file is shorter than the mapping.
var ErrFault = errors.New("mapped: a mapped page could not be read")

// Touch runs fn, which reads mapped memory, with faults on it turned into
// panics (debug.SetPanicOnFault) that Touch recovers as ErrFault. Any
// other panic goes on. It must run in the goroutine that reads.
func Touch(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			// A fault panics with a runtime.Error whose Addr method
			// names the address (runtime's errorAddressString).
			if re, ok := r.(interface{ Addr() uintptr }); ok {
				err = fmt.Errorf("%w (address %#x)", ErrFault, re.Addr())
				return
			}
			panic(r)
		}
	}()
	return fn()
}
