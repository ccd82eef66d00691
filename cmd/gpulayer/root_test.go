package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

func TestVersionPrintsTextAndJSON(t *testing.T) {
	io, _, out, _ := iostreams.Test()
	if code := run([]string{"version"}, io); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.HasPrefix(out.String(), "gpulayer ") {
		t.Fatalf("version output %q", out.String())
	}
	io, _, out, _ = iostreams.Test()
	if code := run([]string{"version", "--json"}, io); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var v map[string]string
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["version"] == "" {
		t.Fatalf("version --json = %q (%v)", out.String(), err)
	}
}

func TestUnknownCommandExitsOneWithError(t *testing.T) {
	io, _, _, errOut := iostreams.Test()
	if code := run([]string{"frobnicate"}, io); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "unknown command") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

func TestCompletionScriptsAreGenerated(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		io, _, out, _ := iostreams.Test()
		if code := run([]string{"completion", shell}, io); code != 0 {
			t.Fatalf("%s: exit %d", shell, code)
		}
		if !strings.Contains(out.String(), "gpulayer") {
			t.Fatalf("%s completion does not mention gpulayer", shell)
		}
	}
}

func TestChdirMissingDirectoryFails(t *testing.T) {
	io, _, _, errOut := iostreams.Test()
	if code := run([]string{"--chdir", "/nonexistent/gpulayer", "version"}, io); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "--chdir") {
		t.Fatalf("stderr %q", errOut.String())
	}
}
