//go:build unix

package inputfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadRefusesWhatIsNotASmallRegularFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, wantErr string
	}{
		{small, ""},
		{big, "is 2 KiB; at most 1 KiB is read"},
		{fifo, "not a regular file (a named pipe)"},
		{dir, "not a regular file (a directory)"},
		{"/dev/zero", "not a regular file (a character device)"},
		{filepath.Join(dir, "missing"), "no such file"},
	}
	// Open refuses the same, and reads the same.
	readAll := func(path string, max int64) ([]byte, error) {
		f, err := Open(path, max)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(f)
	}
	for _, c := range cases {
		for _, read := range []func(string, int64) ([]byte, error){Read, readAll} {
			data, err := read(c.path, 1024)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("%s: %v", c.path, err)
			case c.wantErr == "" && string(data) != "hello":
				t.Errorf("%s: read %q", c.path, data)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("%s: error %v, want one containing %q", c.path, err, c.wantErr)
			case c.wantErr != "" && !strings.Contains(err.Error(), c.path):
				t.Errorf("%s: error %q does not name the file", c.path, err)
			}
		}
	}
}

// A file that grows past the limit after it was opened fails the read
// that reaches past it, rather than being read on for ever; one that ends
// at the limit reads whole.
func TestOpenFailsAReadPastTheLimitOfAFileThatGrew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc")
	if err := os.WriteFile(path, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if data, err := io.ReadAll(f); err != nil || string(data) != "hello" {
		t.Fatalf("a file of exactly the limit: %q, %v", data, err)
	}
	g, err := Open(path, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString(", world"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	data, err := io.ReadAll(g)
	var refused *Error
	if !errors.As(err, &refused) || !refused.TooLarge() || !strings.Contains(err.Error(), "at most 5 bytes is read") {
		t.Fatalf("read %q, error %v; want an *Error saying at most 5 bytes is read", data, err)
	}
	if len(data) > 5 {
		t.Errorf("read %d bytes past the limit of 5", len(data))
	}
}
