package codetree

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is masked by the umask; the hash takes the mode as
	// it is on disk, so set it exactly.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// refused reads root and wants an *Error naming path with why in it.
func refused(t *testing.T, root, path, why string) {
	t.Helper()
	tree, err := Read(root, Options{})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Read: tree %v, error %v; want a refusal naming %s", tree, err, path)
	}
	if e.Path != path || !strings.Contains(e.Error(), why) {
		t.Fatalf("Read refused %q (%v); want %s refused with %q", e.Path, e, path, why)
	}
}

func TestASocketIsRefusedNamingIt(t *testing.T) {
	// A unix socket's path is limited to ~108 bytes: keep the root short.
	root, err := os.MkdirTemp("", "ct")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	write(t, filepath.Join(root, "train.py"), "print(1)\n", 0o644)
	l, err := net.Listen("unix", filepath.Join(root, "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	refused(t, root, filepath.Join(root, "agent.sock"), "a socket")
}

func TestADeviceIsRefusedNamingIt(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "dev", "null")
	if err := os.MkdirAll(filepath.Dir(dev), 0o755); err != nil {
		t.Fatal(err)
	}
	// The same device numbers as /dev/null (1, 3).
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skip("making a device node needs CAP_MKNOD:", err)
		}
		t.Fatal(err)
	}
	refused(t, root, dev, "a device")
}

func TestATreeOverTheFileLimitIsRefused(t *testing.T) {
	defer func(n int) { maxFiles = n }(maxFiles)
	maxFiles = 5
	root := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		write(t, filepath.Join(root, n), n, 0o644)
	}
	if tree, err := Read(root, Options{}); err != nil || len(tree.Files) != 5 {
		t.Fatalf("5 files at a limit of 5: %v, %v", tree, err)
	}
	write(t, filepath.Join(root, "f"), "f", 0o644)
	if _, err := Read(root, Options{}); err == nil || !strings.Contains(err.Error(), "more than 5 files") {
		t.Fatalf("6 files at a limit of 5: %v", err)
	}
	// What the ignore rules drop does not count.
	write(t, filepath.Join(root, ".gpulayerignore"), "f\n.gpulayerignore\n", 0o644)
	if tree, err := Read(root, Options{}); err != nil || len(tree.Files) != 5 {
		t.Fatalf("6 files, one ignored, at a limit of 5: %v, %v", tree, err)
	}
}

// TestTheHashIsOfContentModeAndNames: the hash a plan compares changes
// with any file's content, mode or name and with nothing else (not the
// order files were written in, not their times, not .git).
func TestTheHashIsOfContentModeAndNames(t *testing.T) {
	build := func(t *testing.T, files map[string]string, exec string) string {
		root := t.TempDir()
		for n, c := range files {
			mode := os.FileMode(0o644)
			if n == exec {
				mode = 0o755
			}
			write(t, filepath.Join(root, n), c, mode)
		}
		tree, err := Read(root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return tree.Hash
	}
	files := map[string]string{"train.py": "print(1)\n", "lib/util.py": "x = 1\n", ".git/HEAD": "ref: main\n"}
	base := build(t, files, "")
	if again := build(t, files, ""); again != base {
		t.Fatalf("the same tree hashed twice: %s and %s", base, again)
	}
	noGit := map[string]string{"train.py": "print(1)\n", "lib/util.py": "x = 1\n"}
	if h := build(t, noGit, ""); h != base {
		t.Error(".git changed the hash")
	}
	for name, h := range map[string]string{
		"content": build(t, map[string]string{"train.py": "print(2)\n", "lib/util.py": "x = 1\n"}, ""),
		"mode":    build(t, noGit, "train.py"),
		"name":    build(t, map[string]string{"train2.py": "print(1)\n", "lib/util.py": "x = 1\n"}, ""),
		"moved":   build(t, map[string]string{"train.py": "print(1)\n", "util.py": "x = 1\n"}, ""),
	} {
		if h == base {
			t.Errorf("a change of %s left the hash as it was", name)
		}
	}
}
