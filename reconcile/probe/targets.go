package probe

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/ssh"
)

// Machines lists the declared hosts of every fleet of cfg, in order (fleets
// as cfg sorts them, hosts in declaration order), with the SSH target of
// each. Fleets of machines gpulayer creates have no declared hosts; their
// machines come from state and a provider, not from here.
func Machines(cfg *config.Config) ([]Machine, error) {
	home, _ := os.UserHomeDir()
	var out []Machine
	for _, f := range cfg.Fleets {
		for _, h := range f.Hosts {
			t, err := Target(h, f.SSH, cfg.Dir, home)
			if err != nil {
				return nil, fmt.Errorf("fleet %q, host %q: %w", f.Name, h.Name, err)
			}
			m := Machine{
				Name:          h.Name,
				Fleet:         f.Name,
				Target:        t,
				Host:          claim(h.OwnLocation),
				FleetDefaults: claim(f.Location),
			}
			if h.Created {
				record := claim(h.OwnLocation)
				record.Source = facts.SourceProvider
				m.Provider, m.Host = &record, facts.LocationClaim{}
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// claim is what a block of the configuration says of a location.
func claim(l config.Location) facts.LocationClaim {
	return facts.LocationClaim{Region: l.Region, Zone: l.Zone, NetworkGroup: l.NetworkGroup}
}

// Target is how to reach host with the fleet's ssh block s (nil: the
// defaults: the current user, port 22, ~/.ssh/known_hosts, strict host key
// checking, keys from the SSH agent). Relative paths are read from dir, the
// configuration's directory; "~/" is home.
func Target(h *config.Host, s *config.SSH, dir, home string) (ssh.Target, error) {
	if s == nil {
		s = &config.SSH{}
	}
	t := ssh.Target{
		Name:           h.Name,
		Address:        h.Address,
		Port:           firstNonZero(h.Port, s.Port, 22),
		User:           s.User,
		KnownHostsFile: expandPath(orDefault(s.KnownHosts, "~/.ssh/known_hosts"), dir, home),
		HostKeyCheck:   orDefault(s.HostKeyCheck, config.HostKeyStrict),
		ConnectTimeout: s.ConnectTimeout,
		HostKeys:       h.HostKeys,
	}
	if t.User == "" {
		t.User = currentUser()
	}
	if s.IdentityFile != "" {
		t.IdentityFiles = []string{expandPath(s.IdentityFile, dir, home)}
	}
	if s.Bastion != "" {
		b, err := parseBastion(s.Bastion, t)
		if err != nil {
			return ssh.Target{}, err
		}
		t.Bastion = &b
	}
	return t, nil
}

// parseBastion reads the ssh block's bastion with config.ParseBastion; the
// bastion uses the same keys and known_hosts as the host behind it, and its
// user unless the spec names one.
func parseBastion(spec string, via ssh.Target) (ssh.Target, error) {
	p, err := config.ParseBastion(spec)
	if err != nil {
		return ssh.Target{}, fmt.Errorf("bastion %q: %w", spec, err)
	}
	return ssh.Target{
		Name:           "bastion " + p.Address,
		Address:        p.Address,
		Port:           firstNonZero(p.Port, 22),
		User:           orDefault(p.User, via.User),
		IdentityFiles:  via.IdentityFiles,
		KnownHostsFile: via.KnownHostsFile,
		HostKeyCheck:   via.HostKeyCheck,
		ConnectTimeout: via.ConnectTimeout,
	}, nil
}

func expandPath(p, dir, home string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:])
	case filepath.IsAbs(p) || dir == "":
		return p
	}
	return filepath.Join(dir, p)
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func firstNonZero(v ...int) int {
	for _, x := range v {
		if x != 0 {
			return x
		}
	}
	return 0
}
