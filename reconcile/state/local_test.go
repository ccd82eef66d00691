package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/topology"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// sample is a state with every kind of record in it.
func sample() *State {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	s := New()
	s.SetJob(Job{
		Name: "train",
		Spec: JobSpec{
			Command:     []string{"sh", "-c", "python train.py && echo <done>"},
			Env:         map[string]string{"NCCL_DEBUG": "INFO", "A": "1"},
			Launcher:    "torchrun",
			Nodes:       2,
			GPUsPerNode: 4,
			Policy:      PolicySpec{Name: "tight", GroupLocality: "zone", Rank: "spread", OnUnschedulable: "wait", BucketChoice: "best", Regions: []string{"europe-west1"}, Labels: map[string]string{}},
			StopTimeout: Duration(30 * time.Second),
		},
		Status:     JobRunning,
		RunID:      "run-1",
		MasterAddr: "10.0.0.1",
		MasterPort: 29500,
		LaunchedAt: at,
		Nodes: []Node{{
			Rank: 0, Host: "a1", Fleet: "lab", Address: "10.0.0.1", GPUs: []int{0, 1, 2, 3},
			Location: Location{Region: "europe-west1", Zone: "europe-west1-b"},
			Process:  &Process{PID: 4242, PGID: 4242, StartTime: 123456, BootID: "b00t", RunID: "run-1", StartedAt: at},
		}},
	})
	s.Jobs[0].ConfigHash = s.Jobs[0].Spec.Hash()
	s.Machines = []Machine{{Fleet: "cloud", Name: "cloud-0", Provider: "gcp", ID: "123", Zone: "europe-west1-b", CreatedAt: at,
		Physical: &PhysicalHost{Cluster: "c", Block: "b", SubBlock: "sb", Host: "h"}}}
	s.Facts = &facts.Document{Version: facts.Version, Hosts: []facts.Host{{
		Name: "a1", Address: "10.0.0.1", Status: facts.StatusOK,
		GPUs:     []facts.GPU{{Index: 0, UUID: "GPU-0", Name: "H200", MemoryTotalMiB: 143771, Processes: []facts.Process{}}},
		FreeGPUs: []int{0},
		Topology: &topology.Matrix{Links: [][]topology.Link{{topology.Self}}},
		ProbedAt: at,
	}}}
	return s
}

func mustSave(t *testing.T, l *Local, s *State, expected uint64) {
	t.Helper()
	if err := l.Save(context.Background(), s, expected); err != nil {
		t.Fatalf("Save(serial %d): %v", expected, err)
	}
}

func mustLoad(t *testing.T, l *Local) *State {
	t.Helper()
	s, err := l.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

func mustEncode(t *testing.T, s *State) []byte {
	t.Helper()
	b, err := encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadOfMissingFileIsNewState(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	s := mustLoad(t, l)
	if s.Serial != 0 || s.Lineage != "" || s.FormatVersion != FormatVersion || len(s.Jobs) != 0 || s.Jobs == nil {
		t.Errorf("Load of a missing file = %+v, want New()", s)
	}
	if _, err := os.Stat(filepath.Dir(l.Path())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load created %s: %v", filepath.Dir(l.Path()), err)
	}
}

func TestSaveThenLoadRoundTripsEveryField(t *testing.T) {
	dir := t.TempDir()
	l := NewLocal(DefaultPath(dir))
	l.GpulayerVersion = "v9.8.7"
	s := sample()
	mustSave(t, l, s, 0)

	data := readFile(t, l.Path())
	if !bytes.Equal(data, mustEncode(t, s)) {
		t.Errorf("file differs from the saved state:\n%s", data)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) || !bytes.Contains(data, []byte("\n  \"lineage\"")) {
		t.Errorf("file is not indented JSON ending in a newline:\n%s", data)
	}
	if !bytes.Contains(data, []byte(`"python train.py && echo <done>"`)) {
		t.Errorf("command not written as is:\n%s", data)
	}
	got := mustLoad(t, NewLocal(DefaultPath(dir)))
	if !bytes.Equal(mustEncode(t, got), data) {
		t.Errorf("loaded state differs from the saved one:\n%s\nwant\n%s", mustEncode(t, got), data)
	}
	if got.GpulayerVersion != "v9.8.7" || got.Jobs[0].Spec.StopTimeout != Duration(30*time.Second) || got.Jobs[0].ConfigHash != got.Jobs[0].Spec.Hash() {
		t.Errorf("loaded state lost fields: %+v", got)
	}
	for path, want := range map[string]os.FileMode{filepath.Dir(l.Path()): 0o700 | os.ModeDir, l.Path(): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
}

func TestEverySaveIncrementsSerialKeepsLineageAndBacksUpThePrevious(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	s := New()
	var lineage string
	var previous []byte
	for want := uint64(1); want <= 4; want++ {
		s.SetJob(Job{Name: "job-" + string(rune('a'+want)), Status: JobRunning})
		mustSave(t, l, s, s.Serial)
		if s.Serial != want {
			t.Fatalf("serial after save %d = %d", want, s.Serial)
		}
		if want == 1 {
			lineage = s.Lineage
			if !uuidRE.MatchString(lineage) {
				t.Fatalf("lineage %q is not a random UUID", lineage)
			}
		}
		got := mustLoad(t, l)
		if got.Serial != want || got.Lineage != lineage || len(got.Jobs) != int(want) {
			t.Fatalf("after save %d: loaded serial %d lineage %q jobs %d", want, got.Serial, got.Lineage, len(got.Jobs))
		}
		backup, err := os.ReadFile(BackupPath(l.Path()))
		if previous == nil {
			if !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("first save made a backup: %v", err)
			}
		} else if !bytes.Equal(backup, previous) {
			t.Fatalf("backup after save %d is not the previous version:\n%s", want, backup)
		}
		previous = readFile(t, l.Path())
		s = got
	}
}

func TestSaveOverAVersionItDidNotReadIsAConflict(t *testing.T) {
	dir := t.TempDir()
	l := NewLocal(DefaultPath(dir))
	s := sample()
	mustSave(t, l, s, 0) // serial 1
	mustSave(t, l, s, 1) // serial 2

	other := sample()
	other.Lineage = "11111111-2222-4333-8444-555555555555"
	for _, c := range []struct {
		name     string
		s        *State
		expected uint64
		want     string
	}{
		{"stale serial", mustLoad(t, l), 1, "serial 2, expected 1"},
		{"serial from the future", mustLoad(t, l), 3, "serial 2, expected 3"},
		{"another lineage", other, 2, "it is of lineage " + s.Lineage + ", not " + other.Lineage},
		{"no lineage over a stored one", New(), 2, "the state being saved has none"},
		{"first save over an existing one", New(), 0, "the state being saved has none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := readFile(t, l.Path())
			backup := readFile(t, BackupPath(l.Path()))
			keep := mustEncode(t, c.s)
			err := l.Save(context.Background(), c.s, c.expected)
			var conflict *ConflictError
			if !errors.As(err, &conflict) {
				t.Fatalf("Save = %v, want a *ConflictError", err)
			}
			if conflict.FoundSerial != 2 || conflict.FoundLineage != s.Lineage || conflict.Where != l.Path() {
				t.Errorf("conflict = %+v", conflict)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), l.Path()) {
				t.Errorf("error %q does not say %q and name %s", err, c.want, l.Path())
			}
			if !bytes.Equal(readFile(t, l.Path()), before) || !bytes.Equal(readFile(t, BackupPath(l.Path())), backup) {
				t.Error("a refused save changed the state or its backup")
			}
			if !bytes.Equal(mustEncode(t, c.s), keep) {
				t.Error("a refused save changed the state passed to it")
			}
		})
	}
}

func TestSaveExpectingAStateThatWasRemovedIsAConflict(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	s := sample()
	mustSave(t, l, s, 0)
	if err := os.Remove(l.Path()); err != nil {
		t.Fatal(err)
	}
	err := l.Save(context.Background(), s, 1)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || !strings.Contains(err.Error(), "no longer exists (expected serial 1)") {
		t.Fatalf("Save = %v, want a conflict saying the state is gone", err)
	}
}

// validDocument is a saved document of serial 3, as bytes.
func validDocument(t *testing.T) []byte {
	s := sample()
	s.Serial, s.Lineage, s.GpulayerVersion = 3, "0e4a9f3c-5f6b-4d7e-8a9b-0c1d2e3f4a5b", "v1.0.0"
	return mustEncode(t, s)
}

func TestUnreadableStateIsRefusedByLoadAndSaveAndLeftUntouched(t *testing.T) {
	valid := validDocument(t)
	half := valid[:len(valid)/2]
	replace := func(old, new string) []byte {
		if !bytes.Contains(valid, []byte(old)) {
			t.Fatalf("document has no %q", old)
		}
		return bytes.Replace(valid, []byte(old), []byte(new), 1)
	}
	for _, c := range []struct {
		name  string
		data  []byte
		newer bool
		want  string
	}{
		{"truncated JSON", half, false, "is not valid JSON"},
		{"bad character", replace(`"serial": 3,`, `"serial": 3,,`), false, ".json:4:15: is not valid JSON: invalid character ','"},
		{"empty file", []byte{}, false, "is not valid JSON"},
		{"not an object", []byte("[1, 2]\n"), false, ".json:1: is not a state document: it is a JSON array, not an object"},
		{"data after the document", append(append([]byte{}, valid...), "{}"...), false, "is not valid JSON"},
		{"unknown field", replace(`"serial": 3,`, `"serial": 3, "extra": {"a": 1},`), false, "a field this gpulayer does not know"},
		{"unknown field of a job", replace(`"run_id": "run-1",`, `"run_id": "run-1", "retries": 2,`), false, "a field this gpulayer does not know"},
		{"wrong type", replace(`"serial": 3,`, `"serial": "three",`), false, ".json:4: is not a valid state document: serial is a JSON string, not uint64"},
		{"wrong type deep inside", replace(`"pid": 4242,`, `"pid": true,`), false, "jobs.nodes.process.pid is a JSON bool, not int"},
		{"newer format_version", replace(`"format_version": 1,`, `"format_version": 2,`), true, "has format_version 2 (written by gpulayer v1.0.0); this gpulayer reads format_version 1"},
		{"nesting deeper than encoding/json allows", replace(`"serial": 3,`, `"serial": 3, "x": `+strings.Repeat("[", 10001)+strings.Repeat("]", 10001)+`,`), false, "is not valid JSON: invalid character '[' exceeded max depth"},
		{"no format_version", replace(`"format_version": 1,`, ``), false, "has no format_version"},
		{"format_version 0", replace(`"format_version": 1,`, `"format_version": 0,`), false, "format_version 0"},
		{"no lineage", replace(`"lineage": "0e4a9f3c-5f6b-4d7e-8a9b-0c1d2e3f4a5b",`, `"lineage": "",`), false, "has no lineage"},
		{"serial 0", replace(`"serial": 3,`, `"serial": 0,`), false, "serial 0"},
		{"two jobs of one name", replace(`"jobs": [`, `"jobs": [{"name": "train", "spec": {"command": [], "env": {}, "launcher": "", "nodes": 0, "gpus_per_node": 0, "policy": {"name": "", "group_locality": "", "rank": "", "on_unschedulable": "", "bucket_choice": "", "regions": [], "labels": {}}, "stop_timeout": "0s"}, "config_hash": "", "status": "", "run_id": "", "launched_at": "0001-01-01T00:00:00Z", "nodes": []},`), false, `two jobs named "train"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := NewLocal(DefaultPath(dir))
			if err := os.MkdirAll(filepath.Dir(l.Path()), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(l.Path(), c.data, 0o640); err != nil {
				t.Fatal(err)
			}
			_, err := l.Load(context.Background())
			checkRefused(t, err, l.Path(), c.newer, c.want)
			for _, expected := range []uint64{0, 3} {
				s := sample()
				s.Lineage = "0e4a9f3c-5f6b-4d7e-8a9b-0c1d2e3f4a5b"
				err := l.Save(context.Background(), s, expected)
				checkRefused(t, err, l.Path(), c.newer, c.want)
			}
			if got := readFile(t, l.Path()); !bytes.Equal(got, c.data) {
				t.Errorf("the refused file was changed:\n%s", got)
			}
			if fi, err := os.Stat(l.Path()); err != nil || fi.Mode() != 0o640 {
				t.Errorf("the refused file's mode changed: %v %v", fi.Mode(), err)
			}
			if entries, _ := os.ReadDir(filepath.Dir(l.Path())); len(entries) != 1 {
				t.Errorf("files were written beside the refused file: %v", entries)
			}
		})
	}
}

func checkRefused(t *testing.T, err error, path string, newer bool, want string) {
	t.Helper()
	var unreadable *UnreadableError
	var newerErr *NewerFormatError
	switch {
	case newer && !errors.As(err, &newerErr):
		t.Fatalf("error = %v, want a *NewerFormatError", err)
	case !newer && !errors.As(err, &unreadable):
		t.Fatalf("error = %v, want an *UnreadableError", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s and say %q", err, path, want)
	}
	if !newer && !strings.Contains(err.Error(), "there is no backup "+BackupPath(path)) {
		t.Errorf("error %q does not say there is no backup", err)
	}
}

func TestUnreadableStateErrorSaysWhatTheBackupHolds(t *testing.T) {
	for _, c := range []struct {
		name   string
		backup []byte
		want   string
	}{
		{"readable backup", validDocument(t), "state.json.backup holds the previous version (serial 3)"},
		{"corrupt backup", []byte("{"), "state.json.backup cannot be read either: it is not valid JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLocal(DefaultPath(t.TempDir()))
			os.MkdirAll(filepath.Dir(l.Path()), 0o700)
			if err := os.WriteFile(l.Path(), []byte(`{"format_version": 1, "lineage": `), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(BackupPath(l.Path()), c.backup, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := l.Load(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), l.Path()+":1:") {
				t.Fatalf("Load = %v, want an error with the line and %q", err, c.want)
			}
		})
	}
}

func TestMissingStateWithABackupIsRefused(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	s := sample()
	mustSave(t, l, s, 0)
	mustSave(t, l, s, 1)
	if err := os.Remove(l.Path()); err != nil {
		t.Fatal(err)
	}
	_, err := l.Load(context.Background())
	if err == nil || !strings.Contains(err.Error(), "does not exist, but its backup does") || !strings.Contains(err.Error(), "(serial 1)") {
		t.Fatalf("Load = %v, want a refusal naming the backup", err)
	}
	if err := l.Save(context.Background(), New(), 0); err == nil {
		t.Fatal("Save over a missing state with a backup succeeded")
	}
	if _, err := os.Stat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused save wrote %s: %v", l.Path(), err)
	}
}

func TestStateLargerThanTheLimitIsNeitherReadNorWritten(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	l.MaxBytes = 4 << 10
	small := New()
	mustSave(t, l, small, 0)
	before := readFile(t, l.Path())

	big := mustLoad(t, l)
	big.Jobs = append(big.Jobs, Job{Name: "big", Error: strings.Repeat("x", 8<<10)})
	err := l.Save(context.Background(), big, 1)
	if err == nil || !strings.Contains(err.Error(), "more than the limit of 4 KiB") || !strings.Contains(err.Error(), l.Path()) {
		t.Fatalf("Save of an oversized state = %v", err)
	}
	if !bytes.Equal(readFile(t, l.Path()), before) {
		t.Error("an oversized save changed the file")
	}

	if err := os.WriteFile(l.Path(), append(before, bytes.Repeat([]byte(" "), 8<<10)...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = l.Load(context.Background())
	var unreadable *UnreadableError
	if !errors.As(err, &unreadable) || !strings.Contains(err.Error(), "larger than the limit of 4 KiB") {
		t.Fatalf("Load of an oversized file = %v", err)
	}
}

func TestLockAndBackupPathsFollowTheStatePath(t *testing.T) {
	for _, c := range []struct{ state, lock, backup string }{
		{DefaultPath("/cfg"), "/cfg/.gpulayer/state.lock", "/cfg/.gpulayer/state.json.backup"},
		{"prod.json", "prod.lock", "prod.json.backup"},
		{"/x/prod", "/x/prod.lock", "/x/prod.backup"},
	} {
		if got := LockPath(c.state); got != c.lock {
			t.Errorf("LockPath(%q) = %q, want %q", c.state, got, c.lock)
		}
		if got := BackupPath(c.state); got != c.backup {
			t.Errorf("BackupPath(%q) = %q, want %q", c.state, got, c.backup)
		}
	}
}

func TestSaveAndLoadYieldToACancelledContext(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Save(ctx, New(), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Save = %v", err)
	}
	if _, err := l.Load(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Load = %v", err)
	}
	if _, err := os.Stat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cancelled save wrote: %v", err)
	}
}

// TestASaveAtTheLastSerialIsRefusedAndLosesNothing: a state at serial
// 2^64-1 reads as it is; saving it is refused with a clear error instead
// of wrapping to 0 (which every later read would refuse), and the file
// is left as it was.
func TestASaveAtTheLastSerialIsRefusedAndLosesNothing(t *testing.T) {
	l := NewLocal(DefaultPath(t.TempDir()))
	s := sample()
	mustSave(t, l, s, 0)
	at := mustLoad(t, l)
	at.Serial = math.MaxUint64
	if err := os.WriteFile(l.Path(), mustEncode(t, at), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded := mustLoad(t, l)
	if loaded.Serial != math.MaxUint64 {
		t.Fatalf("serial %d", loaded.Serial)
	}
	before := readFile(t, l.Path())
	err := l.Save(context.Background(), loaded, loaded.Serial)
	if !errors.Is(err, ErrSerialExhausted) || !strings.Contains(err.Error(), "state push") {
		t.Fatalf("Save = %v, want ErrSerialExhausted", err)
	}
	if !bytes.Equal(readFile(t, l.Path()), before) {
		t.Error("the refused save changed the file")
	}
	if got := mustLoad(t, l); got.Serial != math.MaxUint64 {
		t.Errorf("after the refusal the state reads at serial %d", got.Serial)
	}
}

// TestSaveNoticesWhatAnotherWriterPutThere: a save decodes the file only
// when it is not what this backend last wrote, so whatever else changed
// it (another gpulayer, `state push`, a person, a pipeline) must still be
// caught, even a rewrite in place of the same size that keeps the file's
// times.
func TestSaveNoticesWhatAnotherWriterPutThere(t *testing.T) {
	other := "11111111-2222-4333-8444-555555555555"
	for _, c := range []struct {
		name string
		// change rewrites the file this backend wrote (serial 1); data
		// is that file.
		change func(t *testing.T, path string, data []byte)
		want   string
	}{
		{"a later serial written in place, same size and times", func(t *testing.T, path string, data []byte) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(bytes.Replace(data, []byte(`"serial": 1,`), []byte(`"serial": 2,`), 1)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, "serial 2, expected 1"},
		{"another lineage at the same serial, renamed into place", func(t *testing.T, path string, data []byte) {
			var s State
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatal(err)
			}
			replaceFile(t, path, bytes.Replace(data, []byte(s.Lineage), []byte(other), 1))
		}, "it is of lineage " + other},
		{"an unreadable file of the same size", func(t *testing.T, path string, data []byte) {
			replaceFile(t, path, bytes.Repeat([]byte("{"), len(data)))
		}, "is not valid JSON"},
		{"a link to a copy of what it wrote", func(t *testing.T, path string, data []byte) {
			copyPath := path + ".copy"
			if err := os.WriteFile(copyPath, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(copyPath, path); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLocal(DefaultPath(t.TempDir()))
			s := sample()
			mustSave(t, l, s, 0)
			c.change(t, l.Path(), readFile(t, l.Path()))
			changed := readFile(t, l.Path())
			s.SetJob(Job{Name: "after", Status: JobLaunching})
			err := l.Save(context.Background(), s, 1)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Save over a file another wrote = %v, want an error saying %q", err, c.want)
			}
			if !bytes.Equal(readFile(t, l.Path()), changed) {
				t.Error("the refused save changed the file")
			}
			if s.Serial != 1 {
				t.Errorf("the refused save left the state at serial %d", s.Serial)
			}
		})
	}
}

// TestSaveAfterLoadingWhatAnotherWroteGoesOn: the backend then knows the
// file as it is now.
func TestSaveAfterLoadingWhatAnotherWroteGoesOn(t *testing.T) {
	dir := t.TempDir()
	l := NewLocal(DefaultPath(dir))
	mustSave(t, l, sample(), 0)
	otherWriter := NewLocal(l.Path())
	theirs := mustLoad(t, otherWriter)
	theirs.SetJob(Job{Name: "theirs", Status: JobRunning})
	mustSave(t, otherWriter, theirs, 1)

	s := mustLoad(t, l)
	if s.Serial != 2 || s.Job("theirs") == nil {
		t.Fatalf("loaded serial %d, jobs %v", s.Serial, s.Jobs)
	}
	s.SetJob(Job{Name: "ours", Status: JobRunning})
	mustSave(t, l, s, 2)
	got := mustLoad(t, NewLocal(l.Path()))
	if got.Serial != 3 || got.Job("theirs") == nil || got.Job("ours") == nil {
		t.Errorf("after both saves: serial %d, jobs %v", got.Serial, got.Jobs)
	}
	// And the other writer, which did not load since, is refused.
	if err := otherWriter.Save(context.Background(), theirs, 2); err == nil || !strings.Contains(err.Error(), "serial 3, expected 2") {
		t.Errorf("a save over a version the writer did not read = %v", err)
	}
}

// TestSaveRefusesADocumentALoadWouldRefuse: since the next save does not
// decode what this one wrote, nothing a load refuses may be written.
func TestSaveRefusesADocumentALoadWouldRefuse(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(s *State)
		want   string
	}{
		{"two jobs of one name", func(s *State) { s.Jobs = append(s.Jobs, s.Jobs[0]) }, `two jobs named "train"`},
		{"a job with no name", func(s *State) { s.Jobs = append(s.Jobs, Job{}) }, "a job with no name"},
		{"two machines of one name", func(s *State) { s.Machines = append(s.Machines, s.Machines[0]) }, `two machines named "cloud-0"`},
		{"a watcher lease with no id", func(s *State) { s.Watcher = &Watcher{Host: "vm-1"} }, "a watcher lease with no id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLocal(DefaultPath(t.TempDir()))
			s := sample()
			mustSave(t, l, s, 0)
			before := readFile(t, l.Path())
			c.change(s)
			err := l.Save(context.Background(), s, 1)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was saved") {
				t.Fatalf("Save = %v, want a refusal saying %q", err, c.want)
			}
			if !bytes.Equal(readFile(t, l.Path()), before) || s.Serial != 1 {
				t.Error("the refused save changed the file or the state's serial")
			}
			mustLoad(t, l)
		})
	}
}

// replaceFile puts data at path by renaming, as another writer would.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".other"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
