package ssh

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Host-key checking modes of a Target.
const (
	// HostKeyStrict refuses hosts whose key is not in known_hosts.
	HostKeyStrict = "strict"
	// HostKeyAcceptNew records the key of a host that known_hosts does not
	// name yet, and refuses a host whose key changed.
	HostKeyAcceptNew = "accept-new"
)

// globalKnownHostsFile is OpenSSH's system-wide known_hosts, which it
// checks beside the user's own unless told to use another file. A
// variable so that tests can point it elsewhere.
var globalKnownHostsFile = "/etc/ssh/ssh_known_hosts"

// DefaultConnectTimeout bounds the TCP connect and the SSH handshake of one
// dial when a Target does not set ConnectTimeout.
const DefaultConnectTimeout = 10 * time.Second

// Target is one machine to run commands on, and how to reach it.
type Target struct {
	// Name is the host's name as the configuration declares it; errors
	// start with it ("host a3: ...").
	Name string
	// Address is the host name or IP address to connect to.
	Address string
	// Port is the SSH port; 0 means 22.
	Port int
	// User is the remote user; empty means the current local user.
	User string
	// IdentityFiles are private key files to offer, after the agent's keys.
	// A leading "~/" is expanded. When empty, the usual files in ~/.ssh
	// (id_ed25519, id_ecdsa, id_rsa) are offered if they exist.
	IdentityFiles []string
	// KnownHostsFile is where host keys are checked and, with accept-new,
	// recorded; empty means ~/.ssh/known_hosts, with the system's
	// /etc/ssh/ssh_known_hosts checked beside it, as OpenSSH does.
	KnownHostsFile string
	// HostKeyCheck is HostKeyStrict (the default, also for "") or
	// HostKeyAcceptNew.
	HostKeyCheck string
	// HostKeys, when not empty, pins the host's keys: authorized_keys lines
	// ("ssh-ed25519 AAAA...") as the machine's provider published them.
	// The host must offer one of them; known_hosts and HostKeyCheck are
	// not consulted. Machines gpulayer creates are reached this way.
	HostKeys []string
	// Bastion is the jump host the connection goes through; nil for none.
	// Only one hop is supported: a bastion's own Bastion must be nil.
	Bastion *Target
	// ConnectTimeout bounds the TCP connect and the SSH handshake together;
	// 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
}

// label is the name errors use for t.
func (t Target) label() string {
	if t.Name != "" {
		return t.Name
	}
	return t.Address
}

func (t Target) port() int {
	if t.Port == 0 {
		return 22
	}
	return t.Port
}

// hostPort is the address to dial, "host:port".
func (t Target) hostPort() string {
	return net.JoinHostPort(t.Address, strconv.Itoa(t.port()))
}

func (t Target) connectTimeout() time.Duration {
	if t.ConnectTimeout <= 0 {
		return DefaultConnectTimeout
	}
	return t.ConnectTimeout
}

// resolved is a Target with its defaults filled in and its paths expanded.
type resolved struct {
	Target
	user       string
	knownHosts string
	// globalKnownHosts are checked beside knownHosts, never written.
	globalKnownHosts []string
	identities       []string
	explicitID       bool // identities were named by the user, not defaults
	pinned           []ssh.PublicKey
	bastion          *resolved
}

// resolve validates t and fills in its defaults.
func resolve(t Target) (*resolved, error) {
	if t.Address == "" {
		return nil, fmt.Errorf("no address")
	}
	if strings.ContainsAny(t.Address, " \t\r\n") {
		return nil, fmt.Errorf("address %q contains white space", t.Address)
	}
	if t.Port < 0 || t.Port > 65535 {
		return nil, fmt.Errorf("port %d is out of range 1-65535", t.Port)
	}
	switch t.HostKeyCheck {
	case "", HostKeyStrict, HostKeyAcceptNew:
	default:
		return nil, fmt.Errorf("host_key_check %q is not one of %q or %q", t.HostKeyCheck, HostKeyStrict, HostKeyAcceptNew)
	}
	r := &resolved{Target: t, user: t.User}
	if r.HostKeyCheck == "" {
		r.HostKeyCheck = HostKeyStrict
	}
	if r.user == "" {
		u, err := currentUser()
		if err != nil {
			return nil, err
		}
		r.user = u
	}
	var err error
	if t.KnownHostsFile == "" {
		home, herr := os.UserHomeDir()
		if herr != nil {
			return nil, fmt.Errorf("known_hosts: %w", herr)
		}
		r.knownHosts = filepath.Join(home, ".ssh", "known_hosts")
		r.globalKnownHosts = []string{globalKnownHostsFile}
	} else if r.knownHosts, err = expandHome(t.KnownHostsFile); err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	if len(t.IdentityFiles) > 0 {
		r.explicitID = true
		for _, f := range t.IdentityFiles {
			p, err := expandHome(f)
			if err != nil {
				return nil, fmt.Errorf("identity file %s: %w", f, err)
			}
			r.identities = append(r.identities, p)
		}
	} else if home, err := os.UserHomeDir(); err == nil {
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			r.identities = append(r.identities, filepath.Join(home, ".ssh", n))
		}
	}
	for i, line := range t.HostKeys {
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("pinned host key %d of %d: %w", i+1, len(t.HostKeys), err)
		}
		r.pinned = append(r.pinned, k)
	}
	if t.Bastion != nil {
		if t.Bastion.Bastion != nil {
			return nil, fmt.Errorf("bastion %s has a bastion itself; only one hop is supported", t.Bastion.label())
		}
		b, err := resolve(*t.Bastion)
		if err != nil {
			return nil, fmt.Errorf("bastion %s: %w", t.Bastion.label(), err)
		}
		r.bastion = b
	}
	return r, nil
}

// key identifies the connection a pool keeps for r. Targets share a
// connection only when everything that decides whom it trusts and as whom
// it logs in is the same: user, address and port, host key check, the
// known_hosts files, the identity files, and the bastion with all of its
// own. Otherwise a strict target could run on a connection whose host key
// another target's accept-new, or other known_hosts file, let through.
// (The agent is the pool's, the same for every target.)
func (r *resolved) key() string {
	k := fmt.Sprintf("%q@%s host_key_check=%s known_hosts=%q identities=%q",
		r.user, r.hostPort(), r.HostKeyCheck, append([]string{r.knownHosts}, r.globalKnownHosts...), r.identities)
	for _, pk := range r.pinned {
		k += " pinned=" + ssh.FingerprintSHA256(pk)
	}
	if r.bastion != nil {
		k += " via " + r.bastion.key()
	}
	return k
}

func currentUser() (string, error) {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username, nil
	}
	if u := os.Getenv("USER"); u != "" {
		return u, nil
	}
	return "", fmt.Errorf("no user given and the current user is unknown")
}

// expandHome expands a leading "~" or "~/" to the home directory.
func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}
