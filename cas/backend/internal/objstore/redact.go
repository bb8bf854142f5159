package objstore

import (
	"errors"
	"net/url"
	"strings"
)

// Redact returns err with the query of any URL it names removed, for a
// RequestError's Cause, which is logged: net/http's errors quote the whole
// request URL, and a query may carry a credential (an Azure SAS token's
// sig=). The error it returns still unwraps to err.
func Redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	redacted := msg
	for e := err; e != nil; e = errors.Unwrap(e) {
		ue, ok := e.(*url.Error)
		if !ok {
			continue
		}
		if i := strings.IndexByte(ue.URL, '?'); i >= 0 {
			redacted = strings.ReplaceAll(redacted, ue.URL[i+1:], "REDACTED")
		}
	}
	if redacted == msg {
		return err
	}
	return &redactedError{msg: redacted, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
