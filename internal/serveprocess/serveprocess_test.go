package serveprocess

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParseListenLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Addrs
		ok   bool
	}{
		{"listening grpc=127.0.0.1:41 http=127.0.0.1:42", Addrs{"127.0.0.1:41", "127.0.0.1:42", ""}, true},
		{"listening grpc=127.0.0.1:41 http-cache=127.0.0.1:43", Addrs{"127.0.0.1:41", "", "127.0.0.1:43"}, true},
		{"listening grpc=[::1]:5", Addrs{GRPCAddr: "[::1]:5"}, true},
		{"serving on 127.0.0.1:41", Addrs{}, false},
		{"listening http=127.0.0.1:42", Addrs{HTTPAddr: "127.0.0.1:42"}, false},
	} {
		got, ok := ParseListenLine(tc.line)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseListenLine(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

// The test binary itself stands in for a server: run as a child with
// SERVEPROCESS_TEST_CHILD set, it prints that variable's value as its
// first line and waits for a signal.
func TestMain(m *testing.M) {
	if line, ok := os.LookupEnv("SERVEPROCESS_TEST_CHILD"); ok {
		os.Stderr.WriteString("child log\n")
		os.Stdout.WriteString(line + "\n")
		if line == "exit" {
			os.Exit(3)
		}
		select {} // until a signal ends the process
	}
	os.Exit(m.Run())
}

func child(firstLine string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SERVEPROCESS_TEST_CHILD="+firstLine)
	return cmd
}

func TestStartWaitsForTheListenLine(t *testing.T) {
	p, err := Start(context.Background(), child("listening grpc=127.0.0.1:1 http=127.0.0.1:2"))
	if err != nil {
		t.Fatal(err)
	}
	if p.GRPCAddr != "127.0.0.1:1" || p.HTTPAddr != "127.0.0.1:2" {
		t.Errorf("addresses %q, %q", p.GRPCAddr, p.HTTPAddr)
	}
	// The child dies of SIGTERM (it has no handler): not a clean exit.
	if err := p.Stop(syscall.SIGTERM); err == nil || !strings.Contains(err.Error(), "child log") {
		t.Errorf("Stop of a process killed by its signal: %v; want an error quoting its log", err)
	}
}

func TestStartRefusesAnotherFirstLine(t *testing.T) {
	for _, line := range []string{"hello", "exit"} {
		_, err := Start(context.Background(), child(line))
		if err == nil || !strings.Contains(err.Error(), "not a listen line") || !strings.Contains(err.Error(), "child log") {
			t.Errorf("first line %q: %v; want an error saying it is not a listen line, with the log", line, err)
		}
	}
}
