package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileGivesExactModeWhateverTheUmask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	for _, perm := range []fs.FileMode{0o600, 0o664, 0o755} {
		if err := WriteFile(path, []byte("x"), perm); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != perm {
			t.Errorf("mode %v, want %v", info.Mode().Perm(), perm)
		}
	}
}

func TestReplaceKeepsModeAndContentsChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "main.hcl")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Replace(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "new" {
		t.Fatalf("contents %q, %v", b, err)
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", info.Mode().Perm())
	}
}

func TestReplaceRefusesSymlinkAndMissingFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.hcl")
	link := filepath.Join(dir, "link.hcl")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	err := Replace(link, []byte("new"))
	if !errors.Is(err, ErrNotRegular) {
		t.Fatalf("Replace(link) = %v, want ErrNotRegular", err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&fs.ModeSymlink == 0 {
		t.Error("the link was replaced")
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Errorf("target became %q", b)
	}
	if err := Replace(filepath.Join(dir, "missing.hcl"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Replace(missing) = %v, want not exist", err)
	}
}

func TestFailedWriteLeavesOldFileAndNoTemporary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "main.hcl")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory in the way of the rename makes the last step fail after
	// the temporary file was written.
	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(sub, []byte("new"), 0o644)
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != sub {
		t.Fatalf("WriteFile over a directory = %v, want a *fs.PathError naming it", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want main.hcl and sub only", names)
	}
}
