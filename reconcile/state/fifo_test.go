//go:build unix

package state

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStateThatIsNotARegularFileIsRefusedWithoutBlocking(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"fifo", func(path string) error { return syscall.Mkfifo(path, 0o600) }, "is not a regular file"},
		{"directory", func(path string) error { return os.Mkdir(path, 0o700) }, "is not a regular file"},
		{"symbolic link", func(path string) error {
			target := filepath.Join(filepath.Dir(path), "real.json")
			if err := os.WriteFile(target, validDocument(t), 0o600); err != nil {
				return err
			}
			return os.Symlink(target, path)
		}, "is a symbolic link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLocal(DefaultPath(t.TempDir()))
			os.MkdirAll(filepath.Dir(l.Path()), 0o700)
			if err := c.make(l.Path()); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 2)
			go func() {
				_, err := l.Load(context.Background())
				done <- err
				done <- l.Save(context.Background(), New(), 0)
			}()
			for _, op := range []string{"Load", "Save"} {
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), l.Path()) || !strings.Contains(err.Error(), c.want) {
						t.Errorf("%s = %v, want an error naming the file that says %q", op, err, c.want)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("%s blocked on a %s", op, c.name)
				}
			}
			if fi, err := os.Lstat(l.Path()); err != nil || fi.Mode().IsRegular() {
				t.Errorf("the %s was replaced: %v %v", c.name, fi, err)
			}
		})
	}
}
