package membuf

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
)

// DebugEnv names the environment variable that turns on debug mode for every
// pool and buffer in the process. It is read once, when the package is
// initialised; any value that strconv.ParseBool accepts as true turns it on.
// Debug mode can also be turned on for a single pool with [Config].Debug.
const DebugEnv = "MEMBUF_DEBUG"

// debugFromEnv is fixed at start-up so that the check on hot paths is a load
// of a variable that never changes, not a call into os.
var debugFromEnv = parseDebugEnv(os.Getenv(DebugEnv))

func parseDebugEnv(v string) bool {
	on, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && on
}

// ReportKind says what debug mode found.
type ReportKind int

const (
	// ReportLeak: a buffer became garbage without being freed.
	ReportLeak ReportKind = iota + 1
	// ReportDoubleFree: a buffer was freed after its last reference was
	// already released. The misuse itself also panics.
	ReportDoubleFree
	// ReportUseAfterFree: memory returned to a pool was written to before
	// the pool handed it out again.
	ReportUseAfterFree
)

func (k ReportKind) String() string {
	switch k {
	case ReportLeak:
		return "leak"
	case ReportDoubleFree:
		return "double free"
	case ReportUseAfterFree:
		return "use after free"
	}
	return "ReportKind(" + strconv.Itoa(int(k)) + ")"
}

// A Report is one finding of debug mode. Stacks are formatted like
// runtime/debug.Stack output and are empty where they were not recorded.
type Report struct {
	Kind ReportKind
	// Message says what happened, in one line.
	Message string
	// Taken is where the buffer was taken from its pool or created.
	Taken string
	// Freed is where the buffer was (first) freed or returned to its pool.
	Freed string
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "membuf: %s: %s\n", r.Kind, r.Message)
	if r.Taken != "" {
		fmt.Fprintf(&b, "taken at:\n%s", r.Taken)
	}
	if r.Freed != "" {
		fmt.Fprintf(&b, "freed at:\n%s", r.Freed)
	}
	return b.String()
}

var reporter atomic.Pointer[func(Report)]

// SetReporter installs f as the receiver of debug-mode reports and returns
// the previous one (nil for the default). A nil f restores the default, which
// writes each report to standard error. f may be called from any goroutine,
// including the runtime's cleanup goroutine, so it must not block for long.
func SetReporter(f func(Report)) (previous func(Report)) {
	var old *func(Report)
	if f == nil {
		old = reporter.Swap(nil)
	} else {
		old = reporter.Swap(&f)
	}
	if old == nil {
		return nil
	}
	return *old
}

func report(r Report) {
	if f := reporter.Load(); f != nil {
		(*f)(r)
		return
	}
	os.Stderr.WriteString(r.String())
}

// stack is a call stack recorded cheaply (program counters only) and
// formatted only when a report needs it.
type stack struct {
	pcs [32]uintptr
	n   int
}

// recordStack records the caller's stack, leaving out skip frames above the
// caller of recordStack.
func recordStack(skip int) *stack {
	s := new(stack)
	s.n = runtime.Callers(skip+2, s.pcs[:])
	return s
}

func (s *stack) String() string {
	if s == nil || s.n == 0 {
		return ""
	}
	var b strings.Builder
	frames := runtime.CallersFrames(s.pcs[:s.n])
	for {
		f, more := frames.Next()
		fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
	return b.String()
}
