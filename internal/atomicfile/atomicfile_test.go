package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// writes are the two ways to write a file, tested alike.
var writes = map[string]func(string, []byte, os.FileMode) error{"Write": Write, "Replace": Replace}

func TestWriteReplacesTheFileWithTheGivenMode(t *testing.T) {
	for name, write := range writes {
		t.Run(name, func(t *testing.T) { testWriteReplacesTheFile(t, write) })
	}
}

func testWriteReplacesTheFile(t *testing.T, write func(string, []byte, os.FileMode) error) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	st, _ := os.Stat(path)
	if err != nil || string(b) != "new" || st.Mode().Perm() != 0o600 {
		t.Fatalf("content %q mode %v err %v", b, st.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestWriteReplacesALinkRatherThanFollowIt(t *testing.T) {
	for name, write := range writes {
		t.Run(name, func(t *testing.T) { testWriteReplacesALink(t, write) })
	}
}

func testWriteReplacesALink(t *testing.T, write func(string, []byte, os.FileMode) error) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "f")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := write(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the link was followed: victim holds %q", b)
	}
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("path is not a regular file: %v %v", st, err)
	}
}

func TestWriteIntoAMissingDirectoryFails(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "no", "f"), nil, 0o644); err == nil {
		t.Fatal("no error")
	}
}
