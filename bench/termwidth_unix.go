//go:build unix

package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminalWidth returns the width in columns of the terminal f is, or 0 if
// it cannot tell.
func terminalWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
