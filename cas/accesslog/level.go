package accesslog

import "fmt"

// Level is what the access log records.
type Level uint8

const (
	// Off records nothing (and installs no interceptor).
	Off Level = iota
	// Errors records the requests that failed: a gRPC code other than OK
	// and NOT_FOUND, an HTTP status of 400 or more other than 404. A
	// cache miss is not a failure.
	Errors
	// All records every request.
	All
)

var levelNames = [...]string{Off: "off", Errors: "errors", All: "all"}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// ParseLevel parses "off", "errors" or "all".
func ParseLevel(s string) (Level, error) {
	for l, name := range levelNames {
		if s == name {
			return Level(l), nil
		}
	}
	return Off, fmt.Errorf("%q: want off, errors or all", s)
}
