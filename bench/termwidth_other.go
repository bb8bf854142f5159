//go:build !unix

package bench

import "os"

// terminalWidth cannot tell a terminal's width here.
func terminalWidth(*os.File) int { return 0 }
