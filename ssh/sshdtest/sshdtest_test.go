//go:build unix

package sshdtest

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records whether the test was failed or
// skipped instead of stopping it.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }

func TestMissingSSHDFailsUnderCIAndSkipsElsewhere(t *testing.T) {
	for _, tc := range []struct {
		ci       string
		wantFail bool
	}{{"true", true}, {"", false}, {"false", false}} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			unavailable(r, "sshd is not installed")
			if failed := r.failed != ""; failed != tc.wantFail || (r.skipped != "") == tc.wantFail {
				t.Fatalf("failed %q, skipped %q; want failed=%v", r.failed, r.skipped, tc.wantFail)
			}
			if msg := r.failed + r.skipped; !strings.Contains(msg, "sshd is not installed") {
				t.Errorf("message %q does not say why", msg)
			}
		})
	}
}

func TestConfigSetsEverythingTheTestsRelyOn(t *testing.T) {
	s := &Server{Dir: "/tmp/x"}
	cfg := s.config(2222, Options{SetEnv: []string{"PATH=/fake bin:/usr/bin", "A=1"}, Config: []string{"MaxSessions 4"}})
	for _, want := range []string{
		"Port 2222\n", "ListenAddress 127.0.0.1\n", "HostKey /tmp/x/host_key\n",
		"AuthorizedKeysFile /tmp/x/authorized_keys\n", "PidFile /tmp/x/sshd.pid\n",
		"UsePAM no\n", "StrictModes no\n", "MaxSessions 4\n",
		`SetEnv SHLVL=1 "PATH=/fake bin:/usr/bin" A=1` + "\n",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("sshd_config lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Count(cfg, "SetEnv") != 1 {
		t.Errorf("sshd uses only the first SetEnv line:\n%s", cfg)
	}
}

func TestStartServesSSH(t *testing.T) {
	s := Start(t, Options{})
	if err := s.greets(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.KnownHostsLine("127.0.0.1"), fmt.Sprintf("[127.0.0.1]:%d ssh-ed25519 ", s.Port)) {
		t.Errorf("known_hosts line %q", s.KnownHostsLine("127.0.0.1"))
	}
}
