package facts

import (
	"os/exec"
	"testing"
)

// TestScriptIsShellcheckClean runs shellcheck on probe.sh as POSIX sh,
// where it is installed (Debian package shellcheck).
func TestScriptIsShellcheckClean(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck is not installed")
	}
	if out, err := exec.Command(bin, "-s", "sh", "probe.sh").CombinedOutput(); err != nil {
		t.Fatalf("shellcheck probe.sh: %v\n%s", err, out)
	}
}
