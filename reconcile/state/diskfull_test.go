//go:build unix

package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fsizeEnv is the size limit the "full" helper writes under.
const fsizeEnv = "GPULAYER_STATE_TEST_FSIZE"

// fullDiskSave is the "full" helper: under RLIMIT_FSIZE (a disk that fills
// up part way through a write, as far as the writer can tell) it saves a
// version too large to fit, which must fail, then one that fits, which
// must succeed if the limit leaves room for it: the failure must not have
// left this backend's idea of the file wrong. The limit is process-wide,
// hence the child.
func fullDiskSave(ctx context.Context, l *Local) int {
	limit, err := strconv.ParseUint(os.Getenv(fsizeEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := l.Load(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	big := s.Clone()
	big.SetJob(Job{Name: "too-big", Status: JobLaunching, Error: strings.Repeat("x", 64<<10)})
	err = l.Save(ctx, big, s.Serial)
	if !errors.Is(err, syscall.EFBIG) {
		fmt.Fprintf(os.Stderr, "save past the limit = %v, want EFBIG\n", err)
		return 2
	}
	if big.Serial != s.Serial {
		fmt.Fprintf(os.Stderr, "the failed save moved the state to serial %d\n", big.Serial)
		return 2
	}
	small := s.Clone()
	small.SetJob(Job{Name: "fits", Status: JobLaunching})
	err = l.Save(ctx, small, s.Serial)
	fmt.Printf("second save: %v\n", err)
	return 0
}

// TestSaveOnAFullDiskLeavesTheStateAndItsBackup: a save that runs out of
// room, writing the backup or the new version, leaves the state file and
// its backup as they were, removes its temporary file, and the next save
// that fits goes on from there, in the same process or another.
func TestSaveOnAFullDiskLeavesTheStateAndItsBackup(t *testing.T) {
	for _, c := range []struct {
		name string
		// limit is the file size limit, from the state file's size.
		limit func(size int) int
		// secondSaved says the child's second save fits.
		secondSaved bool
	}{
		{"the backup does not fit", func(size int) int { return size / 2 }, false},
		{"the new version does not fit", func(size int) int { return size + 1024 }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLocal(DefaultPath(t.TempDir()))
			s := sample()
			mustSave(t, l, s, 0)
			mustSave(t, l, s, 1)
			state, backup := readFile(t, l.Path()), readFile(t, BackupPath(l.Path()))

			ctx, cancel := context.WithTimeout(context.Background(), childBudget)
			defer cancel()
			cmd := child(t, ctx, "full", l.Path(), fsizeEnv+"="+strconv.Itoa(c.limit(len(state))))
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("child: %v; stderr:\n%s", err, cmd.Stderr)
			}
			if temps, _ := filepath.Glob(filepath.Join(filepath.Dir(l.Path()), ".state.json*.tmp-*")); len(temps) != 0 {
				t.Errorf("the failed saves left temporary files %v", temps)
			}
			if !c.secondSaved {
				if !strings.Contains(out.String(), "file too large") {
					t.Errorf("child's second save: %s, want it refused too", out.String())
				}
				if !bytes.Equal(readFile(t, l.Path()), state) || !bytes.Equal(readFile(t, BackupPath(l.Path())), backup) {
					t.Fatal("a save that did not fit changed the state or its backup")
				}
				got := mustLoad(t, l)
				got.SetJob(Job{Name: "after", Status: JobRunning})
				mustSave(t, l, got, 2)
				return
			}
			if out.String() != "second save: <nil>\n" {
				t.Fatalf("child's second save: %s", out.String())
			}
			got := mustLoad(t, l)
			if got.Serial != 3 || got.Job("fits") == nil || got.Job("too-big") != nil {
				t.Fatalf("after the child the state has serial %d and jobs %v, want serial 3 with the second save's job alone", got.Serial, got.Jobs)
			}
			if !bytes.Equal(readFile(t, BackupPath(l.Path())), state) {
				t.Error("the backup is not the version before the second save")
			}
		})
	}
}
