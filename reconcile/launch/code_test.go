package launch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/codetree"
)

// TestAnUploadCutShortLeavesNoCodeDirectory: a tar stream that ends
// midway (a lost connection, a file that changed while it was sent)
// makes the upload fail and leaves nothing at the code directory's name,
// nor a temporary directory; the whole stream then unpacks there.
func TestAnUploadCutShortLeavesNoCodeDirectory(t *testing.T) {
	src := t.TempDir()
	big := make([]byte, 256<<10)
	for i := range big {
		big[i] = byte(i * 7919 >> 3) // compresses poorly enough to be cut
	}
	if err := os.WriteFile(filepath.Join(src, "a.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "train.py"), []byte("print(1)\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tree, err := codetree.Read(src, codetree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := tree.WriteTar(&stream); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	upload := func(data []byte) ([]byte, error) {
		cmd := exec.Command("sh", "-c", UploadCommand("train", tree.Hash))
		cmd.Env = append(os.Environ(), "HOME="+home)
		cmd.Stdin = bytes.NewReader(data)
		out, _ := cmd.Output()
		return out, ParseUpload(out)
	}
	final := filepath.Join(home, CodeDir("train", tree.Hash))
	if out, err := upload(stream.Bytes()[:stream.Len()/2]); err == nil {
		t.Fatalf("a cut stream was accepted: %s", out)
	}
	entries, _ := os.ReadDir(filepath.Join(home, CodeRoot, "train"))
	if _, err := os.Stat(final); err == nil || len(entries) != 0 {
		t.Fatalf("a cut upload left %v (code directory: %v)", entries, err)
	}
	if out, err := upload(stream.Bytes()); err != nil {
		t.Fatalf("whole stream: %v (%s)", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(final, "a.bin")); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("unpacked a.bin: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(final, "train.py")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("train.py: %v %v", fi, err)
	}
}

// TestAnUploadRemovesOnlyTheTemporaryDirectoriesOfDeadUploads: a cut
// upload whose session was killed (tar with it) leaves its temporary
// directory behind; a later upload removes it once it is older than any
// upload lasts, and keeps a recent one, which may be an upload still
// under way. Under each shell, busybox with its own find and tar.
func TestAnUploadRemovesOnlyTheTemporaryDirectoriesOfDeadUploads(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "train.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree, err := codetree.Read(src, codetree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := tree.WriteTar(&stream); err != nil {
		t.Fatal(err)
	}
	eachShell(t, func(t *testing.T, sh shell) {
		if sh.name == "busybox" {
			for _, tool := range []string{"find", "tar", "gzip", "rm", "mv", "mkdir", "ls", "touch", "head", "tr"} {
				if err := os.Symlink(filepath.Join(sh.bin, "sh"), filepath.Join(sh.bin, tool)); err != nil {
					t.Fatal(err)
				}
			}
		}
		home := t.TempDir()
		base := filepath.Join(home, CodeRoot, "train")
		old, recent := filepath.Join(base, ".tmp-"+tree.Hash+"-101"), filepath.Join(base, ".tmp-"+tree.Hash+"-102")
		for _, d := range []string{filepath.Join(old, "pkg"), filepath.Join(recent, "pkg")} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(old+".err", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		long := time.Now().Add(-staleUpload - time.Minute)
		for _, p := range []string{old, old + ".err"} {
			if err := os.Chtimes(p, long, long); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(filepath.Join(sh.bin, "sh"), "-c", UploadCommand("train", tree.Hash))
		cmd.Env = []string{"HOME=" + home, "PATH=" + sh.bin + string(os.PathListSeparator) + os.Getenv("PATH")}
		cmd.Stdin = bytes.NewReader(stream.Bytes())
		out, _ := cmd.CombinedOutput()
		if err := ParseUpload(out); err != nil {
			t.Fatalf("upload: %v (%s)", err, out)
		}
		for _, p := range []string{old, old + ".err"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s of a dead upload was kept", filepath.Base(p))
			}
		}
		if _, err := os.Stat(filepath.Join(recent, "pkg")); err != nil {
			t.Errorf("a recent temporary directory was removed: %v", err)
		}
		if _, err := os.Stat(filepath.Join(base, tree.Hash, "train.py")); err != nil {
			t.Errorf("the code was not unpacked: %v", err)
		}
	})
}
