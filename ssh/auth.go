package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// keySource finds the keys a pool offers: the SSH agent's and those of
// identity files. Files are parsed once per pool; the agent connection is
// shared by all dials and opened again if it breaks.
type keySource struct {
	agentSocket string

	mu        sync.Mutex
	agentConn net.Conn
	agent     agent.ExtendedAgent
	files     map[string]fileKey
}

// fileKey is the outcome of reading one identity file.
type fileKey struct {
	signer    ssh.Signer
	encrypted bool
	err       error // nil also when the file does not exist
	missing   bool
}

// offered is what a dial offers a host, and what it could not use.
type offered struct {
	signers   []ssh.Signer
	agentKeys int
	agentErr  error
	files     []string // identity files that gave a key
	encrypted []string // identity files skipped because they need a passphrase
}

func (o *offered) describe() string {
	var parts []string
	if o.agentKeys > 0 {
		parts = append(parts, fmt.Sprintf("%d agent key(s)", o.agentKeys))
	}
	if len(o.files) > 0 {
		parts = append(parts, "identity file(s) "+strings.Join(o.files, ", "))
	}
	if len(parts) == 0 {
		return "no keys"
	}
	return strings.Join(parts, " and ")
}

// hint says how to make the missing keys usable, or "" when nothing can be
// suggested.
func (o *offered) hint(agentSocket string) string {
	var h []string
	if len(o.encrypted) > 0 {
		h = append(h, fmt.Sprintf("%s is passphrase protected and gpulayer does not prompt for passphrases; load it into the SSH agent with `ssh-add %s`",
			strings.Join(o.encrypted, ", "), strings.Join(quoteAll(o.encrypted), " ")))
	}
	if agentSocket == "" {
		h = append(h, "no SSH agent is running (SSH_AUTH_SOCK is not set)")
	} else if o.agentErr != nil {
		h = append(h, fmt.Sprintf("the SSH agent at %s could not be used: %v", agentSocket, o.agentErr))
	}
	return strings.Join(h, "; ")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Quote(s)
	}
	return out
}

// keysFor returns the keys to offer r. An identity file that the user
// named and that cannot be read is an error; the default files are only
// offered when they exist.
func (k *keySource) keysFor(r *resolved) (*offered, error) {
	o := &offered{}
	fromFiles := map[string]bool{}
	for _, path := range r.identities {
		fk := k.file(path)
		switch {
		case fk.missing && !r.explicitID:
			continue
		case fk.missing:
			return nil, fmt.Errorf("identity file %s does not exist", path)
		case fk.encrypted:
			o.encrypted = append(o.encrypted, path)
		case fk.err != nil:
			return nil, fmt.Errorf("identity file %s: %w", path, fk.err)
		default:
			o.signers = append(o.signers, fk.signer)
			o.files = append(o.files, path)
			fromFiles[string(fk.signer.PublicKey().Marshal())] = true
		}
	}
	// As OpenSSH does, the identity files come first and the agent's other
	// keys after them: sshd drops a client after MaxAuthTries (6) refused
	// keys, and an agent can hold more than that.
	signers, err := k.agentSigners()
	o.agentErr = err
	for _, s := range signers {
		if !fromFiles[string(s.PublicKey().Marshal())] {
			o.signers = append(o.signers, s)
			o.agentKeys++
		}
	}
	if len(o.signers) == 0 {
		msg := "no SSH key to offer"
		if h := o.hint(k.agentSocket); h != "" {
			msg += ": " + h
		}
		return nil, errors.New(msg)
	}
	return o, nil
}

func (k *keySource) file(path string) fileKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	if fk, ok := k.files[path]; ok {
		return fk
	}
	fk := readIdentityFile(path)
	if k.files == nil {
		k.files = map[string]fileKey{}
	}
	k.files[path] = fk
	return fk
}

func readIdentityFile(path string) fileKey {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fileKey{missing: true}
	}
	if err != nil {
		return fileKey{err: err}
	}
	signer, err := ssh.ParsePrivateKey(data)
	var pm *ssh.PassphraseMissingError
	if errors.As(err, &pm) {
		return fileKey{encrypted: true}
	}
	if err != nil {
		return fileKey{err: fmt.Errorf("not a private key OpenSSH can read: %w", err)}
	}
	return fileKey{signer: signer}
}

// agentTimeout bounds connecting to the agent socket.
const agentTimeout = 2 * time.Second

// agentSigners lists the agent's keys, reconnecting once if the shared
// connection broke.
func (k *keySource) agentSigners() ([]ssh.Signer, error) {
	if k.agentSocket == "" {
		return nil, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for attempt := 0; attempt < 2; attempt++ {
		if k.agent == nil {
			conn, err := net.DialTimeout("unix", k.agentSocket, agentTimeout)
			if err != nil {
				return nil, err
			}
			k.agentConn, k.agent = conn, agent.NewClient(conn)
		}
		signers, err := k.agent.Signers()
		if err == nil {
			return signers, nil
		}
		k.agentConn.Close()
		k.agentConn, k.agent = nil, nil
		if attempt == 1 {
			return nil, err
		}
	}
	return nil, nil
}

func (k *keySource) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.agentConn != nil {
		k.agentConn.Close()
		k.agentConn, k.agent = nil, nil
	}
}
