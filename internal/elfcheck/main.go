// Command elfcheck exits 0 if the ELF file named by its argument is
// statically linked (it has no program interpreter, the dynamic loader that
// a dynamically linked executable names), 1 if it is not, and 2 if it is
// not an ELF file. .ci/check-deploy runs it on the binary the Dockerfile
// builds, which must run in an image with nothing else in it.
package main

import (
	"debug/elf"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: elfcheck FILE")
		os.Exit(2)
	}
	f, err := elf.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "elfcheck:", err)
		os.Exit(2)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			fmt.Fprintf(os.Stderr, "elfcheck: %s is dynamically linked (it has an interpreter)\n", os.Args[1])
			os.Exit(1)
		}
	}
	fmt.Printf("elfcheck: %s is statically linked\n", os.Args[1])
}
