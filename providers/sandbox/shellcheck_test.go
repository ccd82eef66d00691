package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestScriptsAreShellcheckClean runs shellcheck on the machines' scripts,
// and on the shims of their Go tools, as POSIX sh, where it is installed
// (Debian package shellcheck).
func TestScriptsAreShellcheckClean(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck is not installed")
	}
	files := []string{filepath.Join("scripts", "python3"), filepath.Join("scripts", "sandbox-shell"), filepath.Join("scripts", "torchrun")}
	shims := t.TempDir()
	for name := range tools {
		// A program path that needs quoting, as a user's might.
		path := filepath.Join(shims, name)
		if err := os.WriteFile(path, toolShim(name, "/home/o'neil/my tools/gpulayer"), 0o755); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	for _, file := range files {
		if out, err := exec.Command(bin, "-s", "sh", file).CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", file, err, out)
		}
	}
}
