package atomicfile

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
)

// The file-size limit case runs in a child process, since RLIMIT_FSIZE is
// process-wide.
const fsizeChild = "ATOMICFILE_TEST_FSIZE_CHILD"

// TestWriteBeyondFileSizeLimitKeepsOldContents is the failure a truncating
// write turns into a cut file: the limit (or a full disk) stops the write
// part way, and the file must still hold what it held.
func TestWriteBeyondFileSizeLimitKeepsOldContents(t *testing.T) {
	if path := os.Getenv(fsizeChild); path != "" {
		signal.Ignore(syscall.SIGXFSZ) // make the write fail with EFBIG instead of killing us
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 1024, Max: 1024}); err != nil {
			t.Fatal(err)
		}
		for name, write := range writes {
			if err := write(path, make([]byte, 64<<10), 0o644); err == nil {
				t.Fatalf("%s beyond RLIMIT_FSIZE succeeded", name)
			}
		}
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "main.hcl")
	old := []byte("job \"train\" {\n  nodes = 1\n}\n")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteBeyondFileSizeLimitKeepsOldContents$")
	cmd.Env = append(os.Environ(), fsizeChild+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != string(old) {
		t.Fatalf("after a failed write the file holds %d bytes starting %q (%v), want the old contents", len(b), b[:min(len(b), 32)], err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a temporary file was left behind: %d entries", len(entries))
	}
}
