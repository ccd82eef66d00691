package sandbox

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestScriptsAreShellcheckClean runs shellcheck on the machines' scripts as
// POSIX sh, where it is installed (Debian package shellcheck).
func TestScriptsAreShellcheckClean(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck is not installed")
	}
	for _, name := range []string{"nvidia-smi", "python3", "sandbox-shell"} {
		if out, err := exec.Command(bin, "-s", "sh", filepath.Join("scripts", name)).CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", name, err, out)
		}
	}
}
