package objstore

import "fmt"

// FirstError returns the first error of errs, saying how many more there
// were, or nil: a Stat's many requests often fail alike.
func FirstError(errs []error) error {
	var first error
	n := 0
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w (and %d more)", first, n-1)
	}
	return first
}
