//go:build unix

package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// loadWithin runs Load and fails the test, instead of hanging it, when
// Load does not return: a named pipe used to block it for ever.
func loadWithin(t *testing.T, dir string, opts LoadOptions) hcl.Diagnostics {
	t.Helper()
	done := make(chan hcl.Diagnostics, 1)
	go func() {
		_, diags := Load(dir, opts)
		done <- diags
	}()
	select {
	case diags := <-done:
		return diags
	case <-time.After(time.Minute):
		t.Fatal("Load did not return within a minute")
		return nil
	}
}

// badFiles makes, at path, each kind of file the language refuses, and
// says what the diagnostic must contain.
var badFiles = []struct {
	name    string
	make    func(t *testing.T, path string)
	summary string // "" for the caller's "Cannot read ... file"
	want    string
}{
	{"named pipe", func(t *testing.T, path string) {
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}, "", "is not a regular file (a named pipe)"},
	{"link to /dev/zero", func(t *testing.T, path string) {
		if err := os.Symlink("/dev/zero", path); err != nil {
			t.Fatal(err)
		}
	}, "", "is not a regular file (a character device)"},
	{"larger than 1 MiB", func(t *testing.T, path string) {
		if err := os.WriteFile(path, []byte(strings.Repeat("# padding\n", (1<<20)/10+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}, "", "at most 1 MiB is read"},
	{"binary with NUL bytes", func(t *testing.T, path string) {
		b := make([]byte, 50_000)
		for i := range b {
			b[i] = byte(i*7) | 0x80 // no newline, no NUL
		}
		copy(b, "x = 1\n\n\x00")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}, "Not a text file", "holds a NUL byte at line 3"},
	{"invalid UTF-8", func(t *testing.T, path string) {
		if err := os.WriteFile(path, []byte("x = 1\ny = \"\xff\xfe\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}, "Not a text file", "is not valid UTF-8 at line 2"},
}

func TestFilesThatAreNotSmallRegularTextAreRefusedWithOneDiagnostic(t *testing.T) {
	const declared = "variable \"x\" {\n  default = 1\n}\n"
	places := []struct {
		name, file, summary string
		setup               func(dir string) LoadOptions
	}{
		{"configuration file", "main.hcl", "Cannot read configuration file", func(string) LoadOptions { return LoadOptions{} }},
		{"JSON configuration file", "main.hcl.json", "Cannot read configuration file", func(string) LoadOptions { return LoadOptions{} }},
		{"auto variable file", "x.auto.vars.hcl", "Cannot read variable file", func(string) LoadOptions { return LoadOptions{} }},
		{"--var-file", "values.vars", "Cannot read variable file", func(dir string) LoadOptions {
			return LoadOptions{Vars: []VarArg{{File: filepath.Join(dir, "values.vars")}}}
		}},
	}
	for _, place := range places {
		for _, bad := range badFiles {
			t.Run(place.name+"/"+bad.name, func(t *testing.T) {
				dir := t.TempDir()
				if place.file != "main.hcl" && place.file != "main.hcl.json" {
					writeFile(t, dir, "main.hcl", declared)
				}
				path := filepath.Join(dir, place.file)
				bad.make(t, path)
				diags := loadWithin(t, dir, place.setup(dir))
				if len(diags) != 1 {
					t.Fatalf("want one diagnostic, got %d:\n%s", len(diags), diagList(diags))
				}
				summary := place.summary
				if bad.summary != "" {
					summary = bad.summary
				}
				d := diags[0]
				if d.Severity != hcl.DiagError || d.Summary != summary || !strings.Contains(d.Detail, path) || !strings.Contains(d.Detail, bad.want) {
					t.Errorf("got %s\nwant %q naming %s and saying %q", d, summary, path, bad.want)
				}
			})
		}
	}
}

func TestFileFunctionRefusesDevicesAndLargeFiles(t *testing.T) {
	dir := t.TempDir()
	big := writeFile(t, dir, "big.txt", strings.Repeat("x", maxFileBytes+1))
	writeFile(t, dir, "main.hcl", fmt.Sprintf("locals {\n  a = file(%q)\n  b = file(%q)\n}\n", "/dev/zero", big))
	diags := loadWithin(t, dir, LoadOptions{})
	if len(diags) != 2 || !strings.Contains(diags[0].Detail, "/dev/zero is not a regular file (a character device)") ||
		!strings.Contains(diags[1].Detail, "at most 4 MiB is read") {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
}

func TestDiagnosticsOfOneFileAreCappedWithACount(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "unknown_%d {}\n", i)
	}
	file := writeFile(t, dir, "main.hcl", b.String())
	writeFile(t, dir, "other.hcl", "bogus {}\n")
	_, diags := Load(dir, LoadOptions{})
	if len(diags) != maxDiagnosticsPerFile+2 {
		t.Fatalf("got %d diagnostics, want %d:\n%s", len(diags), maxDiagnosticsPerFile+2, diagList(diags))
	}
	more := diags[maxDiagnosticsPerFile]
	if more.Summary != "More problems not shown" || more.Severity != hcl.DiagError ||
		!strings.Contains(more.Detail, "...and 30 more in "+file+" (30 errors, 0 warnings)") {
		t.Errorf("diagnostic %d = %s", maxDiagnosticsPerFile, more)
	}
	if last := diags[len(diags)-1]; last.Subject == nil || !strings.HasSuffix(last.Subject.Filename, "other.hcl") {
		t.Errorf("the other file's diagnostic is missing: %s", last)
	}
}
