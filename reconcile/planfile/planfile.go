// Package planfile is the saved plan: what `gpulayer plan --out FILE`
// writes and `gpulayer apply FILE` and `gpulayer show FILE` read. It holds
// the plan and everything apply needs to carry it out without the
// configuration files: the resolved job specs, the hosts and how to reach
// them, the facts the plan was made from, the variables (sensitive values
// left out) and the source files, for the record.
package planfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/inputfile"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// FormatVersion is the version of the saved plan this package writes; a
// file of another version is refused.
const FormatVersion = 1

// MaxBytes bounds a saved plan read from disk: it holds the facts of every
// host, a few kilobytes each.
const MaxBytes = 512 << 20

// File is a saved plan.
type File struct {
	FormatVersion int             `json:"format_version"`
	Plan          *reconcile.Plan `json:"plan"`
	Config        Snapshot        `json:"config"`
	// Facts are the facts the plan was made from.
	Facts *facts.Document `json:"facts"`
	// Commit is the git commit the configuration was read from, when the
	// plan was made inside a git work tree.
	Commit string `json:"commit,omitempty"`
}

// Snapshot is the configuration a plan was made from, resolved.
type Snapshot struct {
	// Dir is the configuration directory (absolute); relative paths of
	// ssh blocks (identity files, known_hosts) are read from it.
	Dir string `json:"dir"`
	// StatePath is the state file the plan was made against; Backend the
	// configuration's backend block when state is remote (then StatePath
	// is empty).
	StatePath string          `json:"state_path,omitempty"`
	Backend   *config.Backend `json:"backend,omitempty"`
	// Files are the configuration files read, with their text.
	Files []SourceFile `json:"files"`
	// Variables are the input variables' values; sensitive ones have no
	// value here.
	Variables []Variable `json:"variables"`
	// Jobs are the effective configurations of every configured job.
	Jobs []Job `json:"jobs"`
	// Hosts are the declared hosts and the created machines, and how to
	// reach them.
	Hosts []Host `json:"hosts"`
	// Fleets are the fleets of created machines: what apply creates
	// their machines from.
	Fleets []Fleet `json:"fleets,omitempty"`
}

// Fleet is a fleet of created machines.
type Fleet struct {
	Name   string            `json:"name"`
	Count  int               `json:"count"`
	Labels map[string]string `json:"labels,omitempty"`
	SSH    *SSH              `json:"ssh,omitempty"`
	GCP    *config.GCP       `json:"gcp"`
}

// FleetConfig is a configuration holding only the saved plan's fleets of
// created machines, as apply needs them to create and delete machines.
func (f *File) FleetConfig() *config.Config {
	cfg := &config.Config{}
	for _, fl := range f.Config.Fleets {
		h := Host{SSH: fl.SSH}
		cfg.Fleets = append(cfg.Fleets, &config.Fleet{Name: fl.Name, Count: fl.Count, Labels: fl.Labels, SSH: h.ConfigSSH(), GCP: fl.GCP})
	}
	return cfg
}

// SourceFile is one configuration file.
type SourceFile struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Variable is one input variable's value.
type Variable struct {
	Name      string `json:"name"`
	Sensitive bool   `json:"sensitive"`
	// Type is the value's type in HCL's words ("string", "number").
	Type string `json:"type"`
	// Value is the value as JSON; absent for sensitive variables.
	Value json.RawMessage `json:"value,omitempty"`
}

// Job is one configured job's effective configuration.
type Job struct {
	Name string        `json:"name"`
	Spec state.JobSpec `json:"spec"`
}

// Host is one declared host and how to reach it.
type Host struct {
	Name    string `json:"name"`
	Fleet   string `json:"fleet"`
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"`
	SSH     *SSH   `json:"ssh,omitempty"`
	// Created and HostKeys: a machine a provider created, reached with
	// the host keys its provider published.
	Created  bool     `json:"created,omitempty"`
	HostKeys []string `json:"host_keys,omitempty"`
	// OwnLocation is what the host block itself says of where the host
	// is (for a created machine, its provider's record), and
	// FleetLocation its fleet's defaults: apply's staleness probe
	// resolves the host's location from the same claims as the plan's
	// probe did, so that a declared location is not taken for a move.
	OwnLocation   state.Location `json:"own_location"`
	FleetLocation state.Location `json:"fleet_location"`
}

// SSH is a host's ssh block.
type SSH struct {
	Name           string         `json:"name"`
	User           string         `json:"user,omitempty"`
	Port           int            `json:"port,omitempty"`
	IdentityFile   string         `json:"identity_file,omitempty"`
	KnownHosts     string         `json:"known_hosts,omitempty"`
	HostKeyCheck   string         `json:"host_key_check,omitempty"`
	Bastion        string         `json:"bastion,omitempty"`
	ConnectTimeout state.Duration `json:"connect_timeout,omitempty"`
}

// New makes the saved form of plan p made from cfg and doc. dir is the
// configuration's absolute directory, statePath the state file's; code is
// each job's code directory as the plan read it.
func New(p *reconcile.Plan, cfg *config.Config, doc *facts.Document, dir, statePath string, code map[string]*state.CodeSpec) (*File, error) {
	snap := Snapshot{Dir: dir, StatePath: statePath, Files: []SourceFile{}, Variables: []Variable{}, Jobs: []Job{}, Hosts: []Host{}}
	names := make([]string, 0, len(cfg.Files))
	for n := range cfg.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		snap.Files = append(snap.Files, SourceFile{Name: n, Text: string(cfg.Files[n].Bytes)})
	}
	for _, v := range cfg.Variables {
		sv := Variable{Name: v.Name, Sensitive: v.Sensitive, Type: v.Value.Type().FriendlyName()}
		if !v.Sensitive && v.Value.IsWhollyKnown() {
			b, err := ctyjson.Marshal(v.Value, v.Value.Type())
			if err != nil {
				return nil, fmt.Errorf("variable %q: %w", v.Name, err)
			}
			sv.Value = b
		}
		snap.Variables = append(snap.Variables, sv)
	}
	for _, j := range cfg.Jobs {
		snap.Jobs = append(snap.Jobs, Job{Name: j.Name, Spec: reconcile.JobSpec(j, code[j.Name])})
	}
	for _, f := range cfg.Fleets {
		var ssh *SSH
		if s := f.SSH; s != nil {
			ssh = &SSH{Name: s.Name, User: s.User, Port: s.Port, IdentityFile: s.IdentityFile, KnownHosts: s.KnownHosts,
				HostKeyCheck: s.HostKeyCheck, Bastion: s.Bastion, ConnectTimeout: state.Duration(s.ConnectTimeout)}
		}
		for _, h := range f.Hosts {
			sh := Host{Name: h.Name, Fleet: f.Name, Address: h.Address, Port: h.Port, SSH: ssh, Created: h.Created, HostKeys: h.HostKeys,
				OwnLocation: stateLocation(h.OwnLocation), FleetLocation: stateLocation(f.Location)}
			snap.Hosts = append(snap.Hosts, sh)
		}
		if f.GCP != nil {
			g := *f.GCP
			g.DeclRange = hcl.Range{}
			snap.Fleets = append(snap.Fleets, Fleet{Name: f.Name, Count: f.Count, Labels: f.Labels, SSH: ssh, GCP: &g})
		}
	}
	slices.SortFunc(snap.Hosts, func(a, b Host) int { return strings.Compare(a.Name, b.Name) })
	return &File{FormatVersion: FormatVersion, Plan: p, Config: snap, Facts: doc}, nil
}

// Job returns the spec of the job named name, or nil.
func (s *Snapshot) Job(name string) *state.JobSpec {
	for i := range s.Jobs {
		if s.Jobs[i].Name == name {
			return &s.Jobs[i].Spec
		}
	}
	return nil
}

// Host returns the host named name, or nil.
func (s *Snapshot) Host(name string) *Host {
	for i := range s.Hosts {
		if s.Hosts[i].Name == name {
			return &s.Hosts[i]
		}
	}
	return nil
}

// ConfigHost and ConfigSSH are the host and its ssh block as the
// configuration package has them, for building SSH targets.
func (h *Host) ConfigHost() *config.Host {
	own := configLocation(h.OwnLocation)
	return &config.Host{Name: h.Name, Fleet: h.Fleet, Address: h.Address, Port: h.Port, Created: h.Created, HostKeys: h.HostKeys,
		OwnLocation: own, Location: configLocation(h.FleetLocation).Over(own)}
}

// ProbeConfig is the saved plan's hosts as a configuration of fleets and
// hosts only, each host with its ssh block and the location claims the
// plan's probe had: what probe.Machines needs to probe them again as the
// plan did.
func (s *Snapshot) ProbeConfig() *config.Config {
	cfg := &config.Config{Dir: s.Dir}
	fleets := map[string]*config.Fleet{}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		f := fleets[h.Fleet]
		if f == nil {
			f = &config.Fleet{Name: h.Fleet, SSH: h.ConfigSSH(), Location: configLocation(h.FleetLocation)}
			fleets[h.Fleet] = f
			cfg.Fleets = append(cfg.Fleets, f)
		}
		f.Hosts = append(f.Hosts, h.ConfigHost())
	}
	return cfg
}

func stateLocation(l config.Location) state.Location {
	return state.Location{Region: l.Region, Zone: l.Zone, NetworkGroup: l.NetworkGroup}
}

func configLocation(l state.Location) config.Location {
	return config.Location{Region: l.Region, Zone: l.Zone, NetworkGroup: l.NetworkGroup}
}

func (h *Host) ConfigSSH() *config.SSH {
	if h.SSH == nil {
		return nil
	}
	s := h.SSH
	return &config.SSH{Name: s.Name, User: s.User, Port: s.Port, IdentityFile: s.IdentityFile, KnownHosts: s.KnownHosts,
		HostKeyCheck: s.HostKeyCheck, Bastion: s.Bastion, ConnectTimeout: time.Duration(s.ConnectTimeout)}
}

// Encode writes the file as indented JSON.
func (f *File) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadFile reads the saved plan at path: a regular file of at most
// MaxBytes.
func ReadFile(path string) (*File, error) {
	data, err := inputfile.Read(path, MaxBytes)
	if err != nil {
		return nil, err
	}
	return Decode(path, data)
}

// Decode reads a saved plan; name is the file's path, for errors.
func Decode(name string, data []byte) (*File, error) {
	var head struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%s is not a saved plan: %w", name, err)
	}
	if head.FormatVersion == nil {
		return nil, fmt.Errorf("%s is not a saved plan: it has no format_version", name)
	}
	if *head.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%s is a saved plan of format %d; this gpulayer reads format %d", name, *head.FormatVersion, FormatVersion)
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if f.Plan == nil {
		return nil, fmt.Errorf("%s is not a saved plan: it has no plan", name)
	}
	if f.Plan.FormatVersion != reconcile.PlanFormatVersion {
		return nil, fmt.Errorf("%s holds a plan of format %d; this gpulayer reads format %d", name, f.Plan.FormatVersion, reconcile.PlanFormatVersion)
	}
	if err := f.check(name); err != nil {
		return nil, err
	}
	return &f, nil
}

// check refuses a saved plan whose names the configuration could never
// have produced: a job, host or fleet name that is not a valid name (an
// edited plan naming a job "../../x" would make a run directory outside
// ~/.gpulayer/runs on the machine), a run id that is not one, an
// environment variable name sh cannot export, a torchrun argument that
// would change the rendezvous gpulayer sets up. The rules are the
// configuration's own (config.ValidName, config.EnvNameProblem,
// config.TorchrunArgProblem).
func (f *File) check(name string) error {
	bad := func(what, value string) error {
		return fmt.Errorf("%s is not a plan gpulayer made: %s %q is not a valid name (up to 63 letters, digits, '.', '_' and '-', starting with a letter or digit)", name, what, value)
	}
	names := func(what string, values ...string) error {
		for _, v := range values {
			if !config.ValidName(v) {
				return bad(what, v)
			}
		}
		return nil
	}
	for _, c := range f.Plan.Jobs {
		if err := names("job", c.Job); err != nil {
			return err
		}
		if c.Prior != nil {
			if err := names("run id", c.Prior.RunID); err != nil {
				return err
			}
			for _, n := range c.Prior.Nodes {
				if err := names("host", n.Host); err != nil {
					return err
				}
			}
		}
		if c.Placement != nil {
			for _, n := range c.Placement.Nodes {
				if err := names("host", n.Host); err != nil {
					return err
				}
				if err := names("fleet", n.Fleet); err != nil {
					return err
				}
			}
		}
	}
	for _, l := range f.Plan.Leftovers {
		if err := names("job", l.Job); err != nil {
			return err
		}
		if err := names("run id", l.RunID); err != nil {
			return err
		}
	}
	for _, j := range f.Config.Jobs {
		if err := names("job", j.Name); err != nil {
			return err
		}
		for k := range j.Spec.Env {
			if summary, reason := config.EnvNameProblem(k); summary != "" {
				return fmt.Errorf("%s is not a plan gpulayer made: job %q: environment variable %q: %s", name, j.Name, k, reason)
			}
		}
		for _, a := range j.Spec.TorchrunArgs {
			if why := config.TorchrunArgProblem(a); why != "" {
				return fmt.Errorf("%s is not a plan gpulayer made: job %q: torchrun argument %q: %s", name, j.Name, a, why)
			}
		}
	}
	for _, h := range f.Config.Hosts {
		if err := names("host", h.Name); err != nil {
			return err
		}
		if err := names("fleet", h.Fleet); err != nil {
			return err
		}
	}
	for _, fl := range f.Config.Fleets {
		if err := names("fleet", fl.Name); err != nil {
			return err
		}
	}
	return nil
}
