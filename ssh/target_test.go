package ssh

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

func TestConnectionKeyHoldsEverythingThatDecidesTrust(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	base := Target{Name: "a1", Address: "10.0.0.1", User: "gpu", KnownHostsFile: "/k/known_hosts",
		IdentityFiles: []string{"/k/id"}, Bastion: &Target{Address: "jump", User: "ops"}}
	for _, tc := range []struct {
		name   string
		change func(*Target)
		shared bool
	}{
		{name: "same target", change: func(*Target) {}, shared: true},
		{name: "another name", change: func(t *Target) { t.Name = "a1-alias" }, shared: true},
		{name: "strict said or defaulted", change: func(t *Target) { t.HostKeyCheck = HostKeyStrict }, shared: true},
		{name: "another connect timeout", change: func(t *Target) { t.ConnectTimeout = time.Minute }, shared: true},
		{name: "another user", change: func(t *Target) { t.User = "root" }},
		{name: "another port", change: func(t *Target) { t.Port = 2222 }},
		{name: "accept-new", change: func(t *Target) { t.HostKeyCheck = HostKeyAcceptNew }},
		{name: "another known_hosts", change: func(t *Target) { t.KnownHostsFile = "/other/known_hosts" }},
		{name: "default known_hosts", change: func(t *Target) { t.KnownHostsFile = "" }},
		{name: "another identity file", change: func(t *Target) { t.IdentityFiles = []string{"/k/other"} }},
		{name: "default identity files", change: func(t *Target) { t.IdentityFiles = nil }},
		{name: "no bastion", change: func(t *Target) { t.Bastion = nil }},
		{name: "bastion with another policy", change: func(t *Target) {
			b := *t.Bastion
			b.HostKeyCheck = HostKeyAcceptNew
			t.Bastion = &b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := base
			tc.change(&other)
			r1, err1 := resolve(base)
			r2, err2 := resolve(other)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if shared := r1.key() == r2.key(); shared != tc.shared {
				t.Errorf("keys %q and %q: shared %v, want %v", r1.key(), r2.key(), shared, tc.shared)
			}
		})
	}
}
