package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/providers/sandbox"
)

// nobody is a uid other than the tests': the directory of another user.
const nobody = 65534

func TestStartRefusesADirectoryOthersControl(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string) // dir exists, mode 0755
		root    bool                           // needs root, to chown
		want    string
	}{
		{"writable by others", func(t *testing.T, dir string) { chmod(t, dir, 0o777) }, false, "can be written by its group or others (mode 0777)"},
		{"writable by its group", func(t *testing.T, dir string) { chmod(t, dir, 0o775) }, false, "(mode 0775)"},
		{"another user's", func(t *testing.T, dir string) { chown(t, dir) }, true, "belongs to uid 65534"},
		{"bin/ writable by others", func(t *testing.T, dir string) { mkdir(t, dir, "bin"); chmod(t, filepath.Join(dir, "bin"), 0o777) }, false,
			"bin can be written by its group or others (mode 0777)"},
		{"bin/ another user's", func(t *testing.T, dir string) { mkdir(t, dir, "bin"); chown(t, filepath.Join(dir, "bin")) }, true, "bin belongs to uid 65534"},
		{"a machine's directory a link", func(t *testing.T, dir string) {
			mkdir(t, dir, "machines")
			if err := os.Symlink(t.TempDir(), filepath.Join(dir, "machines", "gpu-01")); err != nil {
				t.Fatal(err)
			}
		}, false, "machines/gpu-01 is a symbolic link"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			dir := filepath.Join(t.TempDir(), "sbx")
			mkdir(t, filepath.Dir(dir), "sbx")
			c.prepare(t, dir)
			sb, err := sandbox.Start(sandbox.Options{Hosts: 2, Dir: dir})
			if err == nil {
				sb.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q lacks %q", err, c.want)
			}
			if _, err := os.Lstat(filepath.Join(dir, sandbox.KeyFile)); err == nil && !strings.HasPrefix(c.name, "a machine") {
				t.Errorf("the private key was written into a refused directory")
			}
		})
	}

	t.Run("a link", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "sbx")
		if err := os.Symlink(t.TempDir(), link); err != nil {
			t.Fatal(err)
		}
		if _, err := sandbox.Start(sandbox.Options{Hosts: 1, Dir: link}); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
			t.Fatalf("error %v", err)
		}
	})
}

func TestStartReplacesLinksPlantedInItsDirectoryWithoutFollowingThem(t *testing.T) {
	dir := t.TempDir()
	victims := t.TempDir()
	planted := []string{
		sandbox.ConfigFile, sandbox.KnownHostsFile, sandbox.KeyFile, sandbox.KeyFile + ".pub",
		"bin/sandbox-shell", "bin/python3", "bin/nvidia-smi",
		"machines/gpu-01/gpus", "machines/gpu-01/topo.txt",
	}
	mkdir(t, dir, "bin")
	mkdir(t, dir, "machines")
	mkdir(t, filepath.Join(dir, "machines"), "gpu-01")
	for i, p := range planted {
		victim := filepath.Join(victims, strings.ReplaceAll(p, "/", "_"))
		if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(dir, p)); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
	}
	sb, err := sandbox.Start(sandbox.Options{Hosts: 1, Dir: dir, Shell: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, p := range planted {
		victim := filepath.Join(victims, strings.ReplaceAll(p, "/", "_"))
		if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
			t.Errorf("%s: the link was followed: its target holds %q (%v)", p, b, err)
		}
		if st, err := os.Lstat(filepath.Join(dir, p)); err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s is not a regular file: %v", p, err)
		}
	}
	if st, err := os.Stat(sb.KeyPath()); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("client key: %v %v", st.Mode(), err)
	}
}

func mkdir(t *testing.T, parent, name string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(parent, name), 0o755); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string) {
	t.Helper()
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
}
