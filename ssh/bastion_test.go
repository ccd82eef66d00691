package ssh

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/ssh/sshtest"
)

func TestBastionCarriesConnectionsToHostsBehindIt(t *testing.T) {
	f := newFixture(t)
	jump := f.server(sshtest.Options{AllowTCPForwarding: true})
	inner1, inner2 := f.server(sshtest.Options{}), f.server(sshtest.Options{})
	bastion := f.target("jump", jump)
	p := newPool(t, Options{})
	for _, srv := range []*sshtest.Server{inner1, inner2} {
		tg := f.target("inner", srv)
		tg.Bastion = &bastion
		if res := run(t, p, tg, "echo inside"); string(res.Stdout) != "inside\n" {
			t.Errorf("stdout %q", res.Stdout)
		}
	}
	if st := jump.Stats(); st.Conns != 1 || st.Sessions != 0 {
		t.Errorf("bastion: %d connections and %d sessions, want 1 and 0", st.Conns, st.Sessions)
	}
	for _, srv := range []*sshtest.Server{inner1, inner2} {
		if st := srv.Stats(); st.Conns != 1 {
			t.Errorf("inner host: %d connections, want 1", st.Conns)
		}
	}
}

func TestBastionErrorsNameTheBastion(t *testing.T) {
	f := newFixture(t)
	jump := f.server(sshtest.Options{}) // forwarding off
	inner := f.server(sshtest.Options{})
	bastion := f.target("jump", jump)
	tg := f.target("inner", inner)
	tg.Bastion = &bastion
	_, err := newPool(t, Options{}).Run(t.Context(), tg, "true", nil)
	if err == nil || !strings.Contains(err.Error(), "host inner:") || !strings.Contains(err.Error(), "through bastion jump") {
		t.Fatalf("got %v", err)
	}
	twoHops := bastion
	twoHops.Bastion = &bastion
	tg.Bastion = &twoHops
	if _, err := newPool(t, Options{}).Run(t.Context(), tg, "true", nil); err == nil || !strings.Contains(err.Error(), "only one hop") {
		t.Fatalf("got %v", err)
	}
}
