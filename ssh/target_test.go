package ssh

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveRefusesBadTargets(t *testing.T) {
	hop := &Target{Name: "j1", Address: "j1.example", Bastion: &Target{Address: "j0.example"}}
	for _, tc := range []struct {
		name string
		t    Target
		want string
	}{
		{name: "no address", t: Target{Name: "a1"}, want: "no address"},
		{name: "space in address", t: Target{Address: "a b"}, want: "white space"},
		{name: "port", t: Target{Address: "a", Port: 70000}, want: "port 70000"},
		{name: "host key mode", t: Target{Address: "a", HostKeyCheck: "yolo"}, want: `host_key_check "yolo"`},
		{name: "two hops", t: Target{Address: "a", Bastion: hop}, want: "bastion j1 has a bastion itself"},
		{name: "bad bastion", t: Target{Address: "a", Bastion: &Target{Name: "j"}}, want: "bastion j: no address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := resolve(tc.t); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestResolveFillsDefaults(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	r, err := resolve(Target{Address: "10.0.0.1", User: "gpu", Bastion: &Target{Address: "jump", Port: 2222, User: "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.hostPort() != "10.0.0.1:22" || r.knownHosts != filepath.Join(home, ".ssh", "known_hosts") ||
		r.connectTimeout() != DefaultConnectTimeout || r.explicitID || len(r.identities) != 3 {
		t.Errorf("defaults: %s %s %s %v %v", r.hostPort(), r.knownHosts, r.connectTimeout(), r.explicitID, r.identities)
	}
	if got, want := r.key(), "gpu@10.0.0.1:22 via ops@jump:2222"; got != want {
		t.Errorf("key %q, want %q", got, want)
	}
	if r, _ := resolve(Target{Address: "::1", Port: 2200, User: "u"}); r.hostPort() != "[::1]:2200" {
		t.Errorf("IPv6 host:port %q", r.hostPort())
	}
}

func TestHostErrorNamesTheHostAndDefusesTheMachinesWords(t *testing.T) {
	cause := errors.New("ssh: disconnect, reason 2: \x1b]0;pwned\x07bye")
	err := hostError(Target{Name: "a3", Address: "10.0.0.3"}, cause)
	var he *HostError
	if !errors.As(err, &he) || he.Host != "a3" || !errors.Is(err, cause) {
		t.Fatalf("got %#v", err)
	}
	if got := err.Error(); !strings.HasPrefix(got, "host a3: ssh: disconnect") || strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("Error() = %q", got)
	}
	if got := hostError(Target{Address: "10.0.0.3"}, cause).(*HostError).Host; got != "10.0.0.3" {
		t.Errorf("unnamed target's host %q, want its address", got)
	}
}
