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

// A command whose help says it changes nothing must not offer --state as
// "read and write state": users read that as status or wait writing.
func TestStateFlagHelpSaysWhetherTheCommandWritesState(t *testing.T) {
	for _, c := range []struct {
		cmd    string
		writes bool
	}{
		{"status", false}, {"wait", false}, {"logs", false}, {"show", false},
		{"plan", true}, {"apply", true}, {"destroy", true}, {"watch", true}, {"force-unlock", true},
	} {
		io, _, out, _ := iostreams.Test()
		if code := run([]string{c.cmd, "--help"}, io); code != 0 {
			t.Fatalf("%s --help: exit %d", c.cmd, code)
		}
		writes := strings.Contains(out.String(), "read and write state")
		reads := strings.Contains(out.String(), "--state FILE") && strings.Contains(out.String(), "read state at the local FILE")
		if writes != c.writes || (!c.writes && !reads) {
			t.Errorf("%s --help says of --state: writes %v, reads %v; want writes %v:\n%s", c.cmd, writes, reads, c.writes, out.String())
		}
	}
}
