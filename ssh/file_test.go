package ssh

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

func TestWriteFileReplacesTheFileWhole(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	p := newPool(t, Options{})
	dir := filepath.Join(f.dir, "remote dir's")
	os.MkdirAll(dir, 0o755)
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
	}{
		{name: "launch.sh", content: "#!/bin/sh\necho $RANK\n", mode: 0o755},
		{name: "it's $(odd)", content: strings.Repeat("x", 200000), mode: 0o600},
		{name: "launch.sh", content: "replaced\n", mode: 0o644},
		{name: "empty", content: "", mode: 0o640},
	} {
		path := filepath.Join(dir, tc.name)
		if err := p.WriteFile(context.Background(), f.target("a1", srv), path, tc.mode, strings.NewReader(tc.content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		st, _ := os.Stat(path)
		if err != nil || string(got) != tc.content || st.Mode().Perm() != tc.mode {
			t.Errorf("%s: %d bytes, mode %v, %v; want %d bytes, mode %v", tc.name, len(got), st.Mode().Perm(), err, len(tc.content), tc.mode)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files in the directory, want 3 (no temporary files left)", len(entries))
	}
}

func TestWriteFileErrorNamesThePathAndSanitizesTheMachinesWords(t *testing.T) {
	f := newFixture(t)
	srv := f.server(sshtest.Options{})
	path := filepath.Join(f.dir, "missing", "\x1b[31mfile")
	err := newPool(t, Options{}).WriteFile(context.Background(), f.target("a1", srv), path, 0o644, strings.NewReader("x"))
	if err == nil || !strings.Contains(err.Error(), "host a1: write ") || !strings.Contains(err.Error(), "[31mfile: exit status 1: ") {
		t.Fatalf("got %v", err)
	}
	// dash says "cannot create", bash "No such file or directory".
	msg := err.Error()
	if strings.ContainsRune(msg, '\x1b') || !(strings.Contains(msg, "cannot create") || strings.Contains(msg, "No such file")) {
		t.Errorf("error %q", msg)
	}
}
