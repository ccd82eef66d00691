package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

const unformatted = "job \"train\" {\nnodes = 1\n  command= [\"python\",\"train.py\"]\n}\n"

func TestFmtCheckExitsThreeThenZeroAfterFmt(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "main.hcl")
	if err := os.WriteFile(file, []byte(unformatted), 0o600); err != nil {
		t.Fatal(err)
	}
	io, _, out, _ := iostreams.Test()
	if code := run([]string{"fmt", "--check", dir}, io); code != 3 {
		t.Fatalf("fmt --check: exit %d, want 3", code)
	}
	if strings.TrimSpace(out.String()) != file {
		t.Errorf("fmt --check listed %q, want %q", out.String(), file)
	}
	if b, _ := os.ReadFile(file); string(b) != unformatted {
		t.Fatalf("fmt --check wrote the file")
	}
	io, _, _, _ = iostreams.Test()
	if code := run([]string{"fmt", dir}, io); code != 0 {
		t.Fatalf("fmt: exit %d", code)
	}
	if info, _ := os.Stat(file); info.Mode().Perm() != 0o600 {
		t.Errorf("fmt changed the mode to %v", info.Mode().Perm())
	}
	io, _, out, _ = iostreams.Test()
	if code := run([]string{"fmt", "--check", dir}, io); code != 0 || out.Len() != 0 {
		t.Fatalf("fmt --check after fmt: exit %d, output %q", code, out.String())
	}
}

func TestFmtDiffPrintsUnifiedDiff(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "main.hcl")
	if err := os.WriteFile(file, []byte(unformatted), 0o644); err != nil {
		t.Fatal(err)
	}
	io, _, out, _ := iostreams.Test()
	if code := run([]string{"fmt", "--check", "--diff", file}, io); code != 3 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--- old/" + file, "+++ new/" + file, "-nodes = 1", "+  nodes   = 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFmtRecursiveDescendsButSkipsHiddenDirectories(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a.hcl", "sub/b.hcl", ".git/c.hcl", "sub/d.hcl.json"} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(unformatted), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	io, _, out, _ := iostreams.Test()
	run([]string{"fmt", "--check", dir}, io)
	if got := strings.Fields(out.String()); len(got) != 1 {
		t.Errorf("without --recursive: %v", got)
	}
	io, _, out, _ = iostreams.Test()
	run([]string{"fmt", "--check", "--json", "--recursive", dir}, io)
	var res fmtResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.hcl"), filepath.Join(dir, "sub/b.hcl")}
	if strings.Join(res.Changed, " ") != strings.Join(want, " ") {
		t.Errorf("--recursive changed %v, want %v", res.Changed, want)
	}
}

func TestFmtFileThatDoesNotParseExitsOneWithFileAndLine(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "broken.hcl")
	if err := os.WriteFile(file, []byte("job \"x\" {\n  nodes = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	io, _, _, errOut := iostreams.Test()
	if code := run([]string{"fmt", dir}, io); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "on "+file+" line 1") {
		t.Errorf("stderr:\n%s", errOut.String())
	}
}

func TestFmtMissingPathFails(t *testing.T) {
	io, _, _, errOut := iostreams.Test()
	if code := run([]string{"fmt", "/nonexistent/gpulayer.hcl"}, io); code != 1 || !strings.Contains(errOut.String(), "nonexistent") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestFmtLeavesSymbolicLinksAloneWithAWarning(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	target := filepath.Join(outside, "shared.hcl")
	if err := os.WriteFile(target, []byte(unformatted), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.hcl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"fmt", dir}, {"fmt", link}, {"fmt", "--recursive", dir}} {
		io, _, out, errOut := iostreams.Test()
		if code := run(args, io); code != 0 {
			t.Fatalf("%v: exit %d, stderr:\n%s", args, code, errOut.String())
		}
		if out.Len() != 0 {
			t.Errorf("%v listed %q as changed", args, out.String())
		}
		if !strings.Contains(errOut.String(), "Warning: Symbolic link not formatted") ||
			!strings.Contains(errOut.String(), link+" is a symbolic link to "+target) {
			t.Errorf("%v: stderr lacks the warning naming the link and its target:\n%s", args, errOut.String())
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%v replaced the link", args)
		}
		if b, _ := os.ReadFile(target); string(b) != unformatted {
			t.Fatalf("%v wrote through the link to %s", args, target)
		}
	}
}

func TestFmtFollowsADirectoryNamedAsALink(t *testing.T) {
	real := t.TempDir()
	file := filepath.Join(real, "main.hcl")
	if err := os.WriteFile(file, []byte(unformatted), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "config")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	io, _, out, errOut := iostreams.Test()
	if code := run([]string{"fmt", link}, io); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	if strings.TrimSpace(out.String()) != filepath.Join(link, "main.hcl") {
		t.Errorf("listed %q", out.String())
	}
	if b, _ := os.ReadFile(file); string(b) == unformatted {
		t.Error("the file in the linked directory was not formatted")
	}
}

func TestFmtSanitizesFileNamesAndDiffText(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "evil\x1b[2J\x1b]0;title\x07.hcl")
	src := "# \x1b[31mred\x1b[0m \u202egnp.exe\njob \"x\" {\nnodes = 1\n}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	io, _, out, errOut := iostreams.Test()
	if code := run([]string{"fmt", "--check", "--diff", dir}, io); code != 3 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	if strings.ContainsAny(out.String(), "\x1b\x07\u202e") {
		t.Errorf("terminal controls reached the output:\n%q", out.String())
	}
	if !strings.Contains(out.String(), "+  nodes = 1") || !strings.Contains(out.String(), "evil\uFFFD[2J") {
		t.Errorf("output lacks the sanitized name or the diff:\n%q", out.String())
	}
}
