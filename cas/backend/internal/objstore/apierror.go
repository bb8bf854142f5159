package objstore

import (
	"errors"
	"fmt"
	"net/http"
)

// APIError is an object store's answer that is not a success: its status,
// and the store's error code and message (a HEAD's answer has none).
// Store names the store in the error's text ("s3", "azure").
type APIError struct {
	Store   string
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s: %d %s", e.Store, e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		s += ": " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// StatusOf is the status of the answer err reports (an *APIError), or 0.
func StatusOf(err error) int {
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ae.Status
	}
	return 0
}

// CodeOf is the store's error code err reports (an *APIError), or "".
func CodeOf(err error) string {
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ae.Code
	}
	return ""
}
