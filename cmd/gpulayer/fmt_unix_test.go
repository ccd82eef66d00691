//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

func TestFmtRefusesANamedPipeWithoutWaiting(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe.hcl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan string, 1)
	go func() {
		io, _, _, errOut := iostreams.Test()
		code := run([]string{"fmt", fifo}, io)
		done <- fmt.Sprintf("exit %d: %s", code, errOut.String())
	}()
	select {
	case got := <-done:
		if !strings.HasPrefix(got, "exit 1: ") || !strings.Contains(got, fifo+" is not a regular file (a named pipe)") {
			t.Errorf("got %s", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("fmt did not return within a minute on a named pipe")
	}
}

// The file-size limit case runs in a child process, since RLIMIT_FSIZE is
// process-wide.
const fmtFsizeChild = "GPULAYER_TEST_FMT_FSIZE_CHILD"

func TestFmtWriteFailureLeavesTheFileAsItWas(t *testing.T) {
	if dir := os.Getenv(fmtFsizeChild); dir != "" {
		signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 16, Max: 16}); err != nil {
			t.Fatal(err)
		}
		io, _, _, errOut := iostreams.Test()
		if code := run([]string{"fmt", dir}, io); code != 1 || !strings.Contains(errOut.String(), "main.hcl") {
			t.Fatalf("fmt beyond RLIMIT_FSIZE: exit %d, stderr %q", code, errOut.String())
		}
		return
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "main.hcl")
	if err := os.WriteFile(file, []byte(unformatted), 0o640); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFmtWriteFailureLeavesTheFileAsItWas$")
	cmd.Env = append(os.Environ(), fmtFsizeChild+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != unformatted {
		t.Fatalf("after a failed write main.hcl holds %q (%v), want what it held", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a temporary file was left behind: %d entries", len(entries))
	}
}
