//go:build unix

package inputfile

import (
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
	for _, c := range cases {
		data, err := Read(c.path, 1024)
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
