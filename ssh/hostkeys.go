package ssh

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// UnknownHostKeyError is returned when known_hosts does not list the host
// and the host key check is strict.
type UnknownHostKeyError struct {
	Address        string // "host:port" as dialed
	KeyType        string // e.g. "ssh-ed25519"
	Fingerprint    string // "SHA256:..."
	KnownHostsFile string
}

func (e *UnknownHostKeyError) Error() string {
	host, port, _ := net.SplitHostPort(e.Address)
	keyscan := "ssh-keyscan"
	if port != "" && port != "22" {
		keyscan += " -p " + port
	}
	if t := keyscanType(e.KeyType); t != "" {
		keyscan += " -t " + t
	}
	keyscan += " " + Quote(host) + " >> " + Quote(e.KnownHostsFile)
	return fmt.Sprintf("host key of %s is unknown: it offered %s key %s, which %s does not list; "+
		"if that fingerprint is the host's, accept it with host_key_check = %q in the ssh block, "+
		"or record it with: %s",
		knownhosts.Normalize(e.Address), e.KeyType, e.Fingerprint, e.KnownHostsFile, HostKeyAcceptNew, keyscan)
}

// keyscanType is the name ssh-keyscan -t knows a key type by, or "" for
// types it has no short name for.
func keyscanType(keyType string) string {
	switch {
	case keyType == ssh.KeyAlgoED25519:
		return "ed25519"
	case strings.HasPrefix(keyType, "ecdsa-sha2-"):
		return "ecdsa"
	case keyType == ssh.KeyAlgoRSA:
		return "rsa"
	}
	return ""
}

// HostKeyChangedError is returned when the host offers a key other than
// the ones known_hosts lists for it. It is never accepted, whatever the
// host key check mode: it is what a man-in-the-middle attack looks like.
type HostKeyChangedError struct {
	Address     string // "host:port" as dialed
	KeyType     string
	Fingerprint string
	Known       []knownhosts.KnownKey
}

func (e *HostKeyChangedError) Error() string {
	var known []string
	file := ""
	for _, k := range e.Known {
		known = append(known, fmt.Sprintf("%s:%d (%s %s)", k.Filename, k.Line, k.Key.Type(), ssh.FingerprintSHA256(k.Key)))
		if file == "" {
			file = k.Filename
		}
	}
	return fmt.Sprintf("WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! %s offered %s key %s, but known_hosts holds %s. "+
		"Someone could be eavesdropping on you right now (man-in-the-middle attack), or the host key has just been changed. "+
		"Refusing to connect. If the change is expected, remove the old key with: ssh-keygen -R %s -f %s",
		knownhosts.Normalize(e.Address), e.KeyType, e.Fingerprint, strings.Join(known, ", "),
		Quote(knownhosts.Normalize(e.Address)), Quote(file))
}

// knownHostsFile is the user's known_hosts file, where keys are checked
// and recorded, with any read-only files checked beside it (the system's
// /etc/ssh/ssh_known_hosts). It is parsed once per pool, and again after
// the pool appends to it.
type knownHostsFile struct {
	path string
	also []string

	mu sync.Mutex
	cb ssh.HostKeyCallback // nil while none of the files exists
	// authorities are the @cert-authority lines of the files. knownhosts
	// reports their keys among a host's known keys without saying which
	// they are.
	authorities map[lineOf]bool
}

// lineOf is a line of a known_hosts file, numbered from 1 as knownhosts
// numbers them.
type lineOf struct {
	file string
	line int
}

func newKnownHostsFile(path string, also []string) (*knownHostsFile, error) {
	f := &knownHostsFile{path: path, also: also}
	cb, authorities, err := f.parse()
	if err != nil {
		return nil, err
	}
	f.cb, f.authorities = cb, authorities
	return f, nil
}

// parse reads the files that exist; nil when none does.
func (f *knownHostsFile) parse() (ssh.HostKeyCallback, map[lineOf]bool, error) {
	var files []string
	texts := map[string][]byte{}
	for _, p := range append([]string{f.path}, f.also...) {
		// knownhosts opens the files itself: what would block it or never
		// end is refused here first, and the text read is kept for the
		// @cert-authority lines below.
		text, err := readRegularFile(p, maxKnownHostsBytes)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("known_hosts %s: %w", p, err)
		}
		files = append(files, p)
		texts[p] = text
	}
	if len(files) == 0 {
		return nil, nil, nil
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return nil, nil, fmt.Errorf("known_hosts: %w", err)
	}
	authorities := map[lineOf]bool{}
	for _, p := range files {
		for i, line := range strings.Split(string(texts[p]), "\n") {
			if marker, _, _ := strings.Cut(strings.TrimSpace(line), " "); marker == "@cert-authority" {
				authorities[lineOf{p, i + 1}] = true
			}
		}
	}
	return cb, authorities, nil
}

// hostKeys drops the certificate authorities from keys, leaving the
// host's own.
func (f *knownHostsFile) hostKeys(keys []knownhosts.KnownKey) []knownhosts.KnownKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	return withoutAuthorities(keys, f.authorities)
}

func withoutAuthorities(keys []knownhosts.KnownKey, authorities map[lineOf]bool) []knownhosts.KnownKey {
	var own []knownhosts.KnownKey
	for _, k := range keys {
		if !authorities[lineOf{k.Filename, k.Line}] {
			own = append(own, k)
		}
	}
	return own
}

func (f *knownHostsFile) callback() ssh.HostKeyCallback {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cb
}

// probeKey is a key no known_hosts file lists: checking it against the
// database makes knownhosts report every key it holds for an address.
var probeKey = sync.OnceValue(func() ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil
	}
	return k
})

// known returns the keys the file holds for address ("host:port").
func (f *knownHostsFile) known(address string) []knownhosts.KnownKey {
	cb := f.callback()
	pk := probeKey()
	if cb == nil || pk == nil {
		return nil
	}
	var ke *knownhosts.KeyError
	if err := cb(address, placeholderAddr, pk); errors.As(err, &ke) {
		return ke.Want
	}
	return nil
}

// placeholderAddr is passed as the remote address when only the dialed
// address matters; knownhosts prefers the dialed address when it is given.
var placeholderAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}

// certAlgorithms are the host certificate algorithms offered to a host an
// @cert-authority line covers. The authority's key type says nothing of
// the certified key's, so all of them, as OpenSSH offers.
var certAlgorithms = []string{
	ssh.CertAlgoED25519v01,
	ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01, ssh.CertAlgoECDSA521v01,
	ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01,
}

// hostKeyAlgorithms lists the host key algorithms to offer for address:
// certificates first when an @cert-authority line covers it, then those
// of the keys known_hosts holds for it, so that the server presents the
// key we can check (x/crypto prefers ECDSA where OpenSSH records
// ed25519). Nil means the library's defaults, for hosts not listed.
func (f *knownHostsFile) hostKeyAlgorithms(address string) []string {
	var algos []string
	seen := map[string]bool{}
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			algos = append(algos, a)
		}
	}
	known := f.known(address)
	own := f.hostKeys(known)
	if len(own) < len(known) {
		for _, a := range certAlgorithms {
			add(a)
		}
		if len(own) == 0 {
			// No key of the host's own: after the certificates, any key,
			// so that a host without a certificate is reported unknown
			// (and accept-new can record it), as OpenSSH does.
			for _, a := range ssh.SupportedAlgorithms().HostKeys {
				add(a)
			}
		}
	}
	for _, k := range own {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512)
			add(ssh.KeyAlgoRSASHA256)
			add(ssh.KeyAlgoRSA)
		default:
			add(t)
		}
	}
	return algos
}

// check verifies key for address against the file. With accept-new, an
// address the file does not list is recorded.
func (f *knownHostsFile) check(address string, remote net.Addr, key ssh.PublicKey, mode string) error {
	err := f.verify(address, remote, key)
	var unknown *UnknownHostKeyError
	if !errors.As(err, &unknown) || mode != HostKeyAcceptNew {
		return err
	}
	return f.record(address, remote, key)
}

// verify checks key without changing anything.
func (f *knownHostsFile) verify(address string, remote net.Addr, key ssh.PublicKey) error {
	cb := f.callback()
	if cb != nil {
		err := cb(address, remote, key)
		if err == nil {
			return nil
		}
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) {
			if cert, ok := key.(*ssh.Certificate); ok {
				// An authority it does not list, another host's name,
				// an expired or revoked certificate.
				return fmt.Errorf("host certificate of %s (id %q, signed by %s %s) refused: %w; known_hosts files: %s",
					knownhosts.Normalize(address), cert.KeyId, cert.SignatureKey.Type(), ssh.FingerprintSHA256(cert.SignatureKey),
					err, strings.Join(append([]string{f.path}, f.also...), ", "))
			}
			// Revoked keys and malformed addresses.
			return fmt.Errorf("host key of %s: %w", knownhosts.Normalize(address), err)
		}
		// An authority's key is not the host's: a host it covers that
		// shows a plain key is unknown, not changed, as with OpenSSH.
		if own := f.hostKeys(ke.Want); len(own) > 0 {
			return &HostKeyChangedError{Address: address, KeyType: key.Type(), Fingerprint: ssh.FingerprintSHA256(key), Known: own}
		}
	}
	return &UnknownHostKeyError{Address: address, KeyType: key.Type(), Fingerprint: ssh.FingerprintSHA256(key), KnownHostsFile: f.path}
}

// record appends key for address to the file, under an exclusive lock so
// that concurrent gpulayer runs (and ssh itself, which appends the same
// way) never interleave lines. Another writer may have recorded the host
// since the file was read: the file is read again under the lock and a
// key it now holds wins, as if it had been there from the start.
func (f *knownHostsFile) record(address string, remote net.Addr, key ssh.PublicKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return fmt.Errorf("recording host key of %s: %w", knownhosts.Normalize(address), err)
	}
	file, err := os.OpenFile(f.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("recording host key of %s: %w", knownhosts.Normalize(address), err)
	}
	defer file.Close()
	if err := lockFile(file); err != nil {
		return fmt.Errorf("recording host key of %s: locking %s: %w", knownhosts.Normalize(address), f.path, err)
	}
	defer unlockFile(file)

	// The last byte says whether the file ends its last line.
	info, err := file.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	var last [1]byte
	if err == nil && info.Size() > 0 {
		_, err = file.ReadAt(last[:], info.Size()-1)
	}
	if err != nil {
		return fmt.Errorf("recording host key of %s: reading %s: %w", knownhosts.Normalize(address), f.path, err)
	}
	cb, authorities, err := f.parse()
	if err != nil {
		return err
	}
	f.cb, f.authorities = cb, authorities
	if cb != nil {
		if err := cb(address, remote, key); err == nil {
			return nil
		} else if ke := (*knownhosts.KeyError)(nil); errors.As(err, &ke) {
			if own := withoutAuthorities(ke.Want, authorities); len(own) > 0 {
				return &HostKeyChangedError{Address: address, KeyType: key.Type(), Fingerprint: ssh.FingerprintSHA256(key), Known: own}
			}
		}
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(address)}, key) + "\n"
	if info.Size() > 0 && last[0] != '\n' {
		line = "\n" + line
	}
	if _, err := file.WriteString(line); err != nil {
		return fmt.Errorf("recording host key of %s in %s: %w", knownhosts.Normalize(address), f.path, err)
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("recording host key of %s in %s: %w", knownhosts.Normalize(address), f.path, err)
	}
	if f.cb, f.authorities, err = f.parse(); err != nil {
		return err
	}
	return nil
}

// PinnedHostKeyError is returned when a host whose keys are pinned (its
// provider published them) offers another key.
type PinnedHostKeyError struct {
	Address     string // "host:port" as dialed
	KeyType     string
	Fingerprint string
}

func (e *PinnedHostKeyError) Error() string {
	return fmt.Sprintf("host key of %s does not match the keys its provider published: it offered %s key %s; "+
		"either the machine was recreated since gpulayer recorded it (run gpulayer plan again to refresh the record) "+
		"or another machine answers at that address",
		knownhosts.Normalize(e.Address), e.KeyType, e.Fingerprint)
}

// pinnedHostKeys is the host key check of a target with pinned keys: the
// key offered must be one of them, and only their algorithms are asked
// for, so that the server offers a key that can match.
func pinnedHostKeys(hostPort string, pinned []ssh.PublicKey) (ssh.HostKeyCallback, []string) {
	var algos []string
	for _, k := range pinned {
		for _, a := range algorithmsFor(k.Type()) {
			if !slices.Contains(algos, a) {
				algos = append(algos, a)
			}
		}
	}
	check := func(address string, remote net.Addr, key ssh.PublicKey) error {
		offered := key.Marshal()
		for _, k := range pinned {
			if bytes.Equal(k.Marshal(), offered) {
				return nil
			}
		}
		return &PinnedHostKeyError{Address: hostPort, KeyType: key.Type(), Fingerprint: ssh.FingerprintSHA256(key)}
	}
	return check, algos
}

// algorithmsFor is the host key algorithms that verify with a key of this
// type: an RSA key signs with SHA-2 as well as SHA-1.
func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}
