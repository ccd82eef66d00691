package reconcile

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// RecordReach is what state keeps of how a node's machine was reached: the
// target a launch used, and the host key the machine proved it holds then
// (hostKey, authorized_keys form; "" when no connection was made). A
// machine whose provider published its keys keeps those.
func RecordReach(t ssh.Target, hostKey string) *state.Reach {
	r := &state.Reach{
		Port:           t.Port,
		User:           t.User,
		IdentityFiles:  slices.Clone(t.IdentityFiles),
		KnownHostsFile: t.KnownHostsFile,
		HostKeyCheck:   t.HostKeyCheck,
		HostKeys:       slices.Clone(t.HostKeys),
		ConnectTimeout: state.Duration(t.ConnectTimeout),
	}
	if len(r.HostKeys) == 0 && hostKey != "" {
		r.HostKeys = []string{hostKey}
	}
	if b := t.Bastion; b != nil {
		r.Bastion = &state.Bastion{Address: b.Address, Port: b.Port, User: b.User}
	}
	return r
}

// NodeTarget is how to reach the machine of a node state records. The
// configuration's target is used while the host is declared at the
// address the node was launched at; otherwise (the host was removed from
// the configuration, or now names another machine) the node's own record,
// pinned to the host key the machine proved at the launch, so that a run
// gpulayer started can always be found and stopped again, and never on a
// machine that merely took over the address.
func NodeTarget(targets map[string]ssh.Target, n state.Node) (ssh.Target, error) {
	r := n.Reach
	if t, ok := targets[n.Host]; ok && t.Address == n.Address {
		launchedAt := n.Port
		if r != nil {
			launchedAt = r.Port
		}
		if launchedAt == 0 || samePort(t.Port, launchedAt) {
			return t, nil
		}
	}
	if r == nil {
		if _, declared := targets[n.Host]; declared {
			return ssh.Target{}, fmt.Errorf("host %s is now declared at another address than %s, and state has no record of how it reached %s (written by an older gpulayer)", n.Host, hostPort(n.Address, n.Port), hostPort(n.Address, n.Port))
		}
		return ssh.Target{}, fmt.Errorf("host %s is not declared, and state has no record of how to reach it (written by an older gpulayer)", n.Host)
	}
	t := ssh.Target{
		Name:           n.Host,
		Address:        n.Address,
		Port:           r.Port,
		User:           r.User,
		IdentityFiles:  slices.Clone(r.IdentityFiles),
		KnownHostsFile: r.KnownHostsFile,
		HostKeyCheck:   r.HostKeyCheck,
		HostKeys:       slices.Clone(r.HostKeys),
		ConnectTimeout: time.Duration(r.ConnectTimeout),
	}
	if b := r.Bastion; b != nil {
		t.Bastion = &ssh.Target{
			Name: "bastion " + b.Address, Address: b.Address, Port: b.Port, User: b.User,
			IdentityFiles: t.IdentityFiles, KnownHostsFile: t.KnownHostsFile, HostKeyCheck: t.HostKeyCheck,
			ConnectTimeout: t.ConnectTimeout,
		}
	}
	return t, nil
}

// samePort compares a target's port with a node's, 0 and 22 being one.
func samePort(a, b int) bool {
	if a == 0 {
		a = 22
	}
	if b == 0 {
		b = 22
	}
	return a == b
}

func hostPort(addr string, port int) string {
	if port == 0 || port == 22 {
		return addr
	}
	return fmt.Sprintf("%s:%d", addr, port)
}
