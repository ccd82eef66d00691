package config

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Defaults of attributes that are not set.
const (
	DefaultSSHPort        = 22
	DefaultKnownHosts     = "~/.ssh/known_hosts"
	DefaultConnectTimeout = 10 * time.Second
	DefaultStopTimeout    = 30 * time.Second
	// DefaultStartCheck is how long a node's process must run after its
	// start to count as started (start_check): long enough for a command
	// that fails at once, a missing script or a bad flag, to have exited
	// on a busy machine (docs/apply.md, "Confirming a launch").
	DefaultStartCheck = 300 * time.Millisecond
	// MaxStartCheck bounds start_check: the launch's SSH session stays
	// open while it runs.
	MaxStartCheck = 5 * time.Minute
	// Lifecycle defaults (docs/lifecycle.md).
	DefaultOnLost          = 3
	DefaultRestartDelay    = 30 * time.Second
	DefaultRestartMaxDelay = 10 * time.Minute
	DefaultLostAfter       = 5 * time.Minute
	DefaultCompletionGrace = 5 * time.Minute
	DefaultGPUsPerNode     = 1
)

// Allowed values of the enumerated attributes, in the order documentation
// and diagnostics list them.
var (
	HostKeyChecks   = []string{HostKeyStrict, HostKeyAcceptNew}
	GroupLocalities = []string{LocalityPrefer, LocalityNVLinkDomain, LocalityNetworkGroup, LocalityZone, LocalityRegion, LocalityAny}
	Ranks           = []string{RankSpread, RankFirstFit, RankMostFreeMemory, RankBinpack}
	Unschedulables  = []string{UnschedulableWait, UnschedulableFail}
	BucketChoices   = []string{BucketBestFit, BucketFirstFill}
	Launchers       = []string{LauncherTorchrun, LauncherPlain}
	Compatibles     = []string{CompatTorch, CompatCUDADriver, CompatGPUModel}
	// SliceLocalities are the levels a slice can keep to: those of
	// GroupLocalities that name a level with values (not prefer or any),
	// tightest first.
	SliceLocalities = sliceLocalities()
)

func sliceLocalities() []string {
	var out []string
	for _, l := range GroupLocalities {
		if l != LocalityPrefer && l != LocalityAny {
			out = append(out, l)
		}
	}
	return out
}

var sshSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "user"}, {Name: "port"}, {Name: "identity_file"}, {Name: "known_hosts"},
	{Name: "host_key_check"}, {Name: "bastion"}, {Name: "connect_timeout"},
}}

var policySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "group_locality"}, {Name: "rank"}, {Name: "on_unschedulable"},
		{Name: "bucket_choice"}, {Name: "regions"}, {Name: "labels"}, {Name: "compatible"},
		{Name: "max_wait"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "slice"}},
}

var sliceSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "nodes", Required: true}, {Name: "locality", Required: true},
}}

// sliceType is the type of a policy object's slice attribute.
var sliceType = cty.Object(map[string]cty.Type{"nodes": cty.Number, "locality": cty.String})

var fleetSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "ssh"}, {Name: "region"}, {Name: "zone"}, {Name: "network_group"},
		{Name: "labels"}, {Name: "count"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "host", LabelNames: []string{"name"}},
		{Type: "gcp"},
		{Type: "link_bandwidth"},
	},
}

var hostSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "address", Required: true}, {Name: "region"}, {Name: "zone"},
	{Name: "network_group"}, {Name: "labels"},
}}

var jobSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "policy"}, {Name: "nodes", Required: true}, {Name: "gpus_per_node"},
		{Name: "command", Required: true}, {Name: "env"}, {Name: "workdir"},
		{Name: "labels"}, {Name: "launcher"}, {Name: "stop_timeout"}, {Name: "start_check"}, {Name: "master_port"},
		{Name: "kind"}, {Name: "completion_grace"}, {Name: "deadline"}, {Name: "stall_timeout"},
		{Name: "setup"}, {Name: "setup_timeout"}, {Name: "expected_duration"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "torchrun"}, {Type: "restart"}, {Type: "code"}},
}

var restartSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "attempts"}, {Name: "on_lost"}, {Name: "retry_exit_codes"}, {Name: "fail_exit_codes"},
	{Name: "delay"}, {Name: "max_delay"}, {Name: "lost_after"},
}}

// declare checks the name of a top-level block and that no earlier block of
// its kind has it. Names that expressions refer to (identifier) must be HCL
// identifiers. ok is false when the block must be skipped.
func (l *loader) declare(declared map[string]hcl.Range, kind string, identifier bool, b *hcl.Block) (name string, ok bool) {
	name, nameRange := blockName(b)
	if identifier {
		ok = l.checkIdentifier(kind, name, nameRange)
	} else {
		ok = l.checkName(kind, name, nameRange)
	}
	if !ok {
		return "", false
	}
	if first, dup := declared[name]; dup {
		l.add(duplicate(kind, name, first, b.DefRange))
		return "", false
	}
	declared[name] = b.DefRange
	return name, true
}

// checkIdentifier checks the name of a block that expressions refer to
// (var.x, ssh.x, policy.x): it must be an HCL identifier.
func (l *loader) checkIdentifier(kind, name string, rng hcl.Range) bool {
	if hclsyntax.ValidIdentifier(name) {
		return true
	}
	l.add(&hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid " + kind + " name",
		Detail: fmt.Sprintf("%q cannot be the name of %s %s: a name starts with a letter or underscore and holds only letters, digits, underscores and hyphens.",
			name, strings.ToLower(article(kind)), kind),
		Subject: rng.Ptr(),
	})
	return false
}

// ValidName reports whether name can name a fleet, host or job, which
// appear in plans, state, process names and paths on machines: up to 63
// letters, digits, '.', '_' and '-', starting with a letter or digit (so
// never "..", "/" or an empty path element). A saved plan's names are
// checked with it too.
func ValidName(name string) bool {
	ok := name != "" && len(name) <= 63
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || (r != '-' && r != '_' && r != '.')) {
			ok = false
		}
	}
	return ok
}

// checkName checks the name of a fleet, host or job with ValidName.
func (l *loader) checkName(kind, name string, rng hcl.Range) bool {
	if ValidName(name) {
		return true
	}
	l.add(&hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid " + kind + " name",
		Detail: fmt.Sprintf("%q cannot be the name of %s %s: use up to 63 letters, digits, '.', '_' and '-', starting with a letter or digit.",
			name, strings.ToLower(article(kind)), kind),
		Subject: rng.Ptr(),
	})
	return false
}

func (l *loader) sshBlocks(blocks hcl.Blocks) {
	l.sshs = &namespace{noun: "ssh block", plural: "ssh blocks", names: map[string]bool{}, values: map[string]cty.Value{}}
	d := l.decoder(newScope().with("var", l.vars).with("local", l.locals))
	declared := map[string]hcl.Range{}
	for _, b := range blocks {
		name, ok := l.declare(declared, "ssh block", true, b)
		if !ok {
			continue
		}
		s := &SSH{
			Name: name, Port: DefaultSSHPort, KnownHosts: DefaultKnownHosts,
			HostKeyCheck: HostKeyStrict, ConnectTimeout: DefaultConnectTimeout, DeclRange: b.DefRange,
		}
		content, diags := b.Body.Content(sshSchema)
		l.add(diags...)
		a := content.Attributes
		d.str(a, "user", &s.User)
		if d.integer(a, "port", 1, &s.Port) && s.Port > 65535 {
			d.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value for port",
				Detail: fmt.Sprintf("port must be from 1 to 65535, got %d.", s.Port), Subject: a["port"].Expr.Range().Ptr()})
		}
		d.str(a, "identity_file", &s.IdentityFile)
		d.str(a, "known_hosts", &s.KnownHosts)
		d.enum(a, "host_key_check", HostKeyChecks, &s.HostKeyCheck)
		if d.str(a, "bastion", &s.Bastion) && s.Bastion != "" {
			if err := checkBastion(s.Bastion); err != nil {
				d.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid bastion address",
					Detail: capitalize(err.Error()) + ".", Subject: a["bastion"].Expr.Range().Ptr()})
			}
		}
		d.duration(a, "connect_timeout", &s.ConnectTimeout)
		l.sshs.names[name] = true
		l.sshs.values[name] = d.object(a, map[string]cty.Value{
			"name":            cty.StringVal(s.Name),
			"user":            cty.StringVal(s.User),
			"port":            cty.NumberIntVal(int64(s.Port)),
			"identity_file":   cty.StringVal(s.IdentityFile),
			"known_hosts":     cty.StringVal(s.KnownHosts),
			"host_key_check":  cty.StringVal(s.HostKeyCheck),
			"bastion":         cty.StringVal(s.Bastion),
			"connect_timeout": cty.StringVal(s.ConnectTimeout.String()),
		})
		l.cfg.SSH = append(l.cfg.SSH, s)
	}
	l.add(d.diags...)
	sort.Slice(l.cfg.SSH, func(i, j int) bool { return l.cfg.SSH[i].Name < l.cfg.SSH[j].Name })
}

func (l *loader) policies(blocks hcl.Blocks) {
	l.pols = &namespace{noun: "policy", plural: "policies", names: map[string]bool{}, values: map[string]cty.Value{}}
	d := l.decoder(newScope().with("var", l.vars).with("local", l.locals).with("ssh", l.sshs))
	declared := map[string]hcl.Range{}
	for _, b := range blocks {
		name, ok := l.declare(declared, "policy", true, b)
		if !ok {
			continue
		}
		p := DefaultPolicy()
		p.Name, p.DeclRange = name, b.DefRange
		content, diags := b.Body.Content(policySchema)
		l.add(diags...)
		a := content.Attributes
		d.enum(a, "group_locality", GroupLocalities, &p.GroupLocality)
		d.enum(a, "rank", Ranks, &p.Rank)
		d.enum(a, "on_unschedulable", Unschedulables, &p.OnUnschedulable)
		d.enum(a, "bucket_choice", BucketChoices, &p.BucketChoice)
		d.strList(a, "regions", &p.Regions)
		d.strMap(a, "labels", &p.Labels)
		l.compatible(d, a, p)
		p.Slice = l.slice(d, p, content.Blocks)
		maxWait(d, a, p)
		slice := cty.NullVal(sliceType)
		if p.Slice != nil {
			slice = cty.ObjectVal(map[string]cty.Value{"nodes": cty.NumberIntVal(int64(p.Slice.Nodes)), "locality": cty.StringVal(p.Slice.Locality)})
		}
		l.pols.names[name] = true
		l.pols.values[name] = d.object(a, map[string]cty.Value{
			"name":             cty.StringVal(p.Name),
			"group_locality":   cty.StringVal(p.GroupLocality),
			"rank":             cty.StringVal(p.Rank),
			"on_unschedulable": cty.StringVal(p.OnUnschedulable),
			"bucket_choice":    cty.StringVal(p.BucketChoice),
			"regions":          stringList(p.Regions),
			"labels":           stringMap(p.Labels),
			"compatible":       stringList(p.Compatible),
			"slice":            slice,
			"max_wait":         cty.StringVal(p.MaxWait.String()),
		})
		l.cfg.Policies = append(l.cfg.Policies, p)
	}
	l.add(d.diags...)
	sort.Slice(l.cfg.Policies, func(i, j int) bool { return l.cfg.Policies[i].Name < l.cfg.Policies[j].Name })
}

// DefaultPolicy is the policy of a job that names none: prefer the tightest
// group, spread load, wait when nothing fits, choose the best-fitting bucket,
// one torch version per group.
func DefaultPolicy() *Policy {
	return &Policy{
		Name:            "default",
		GroupLocality:   LocalityPrefer,
		Rank:            RankSpread,
		OnUnschedulable: UnschedulableWait,
		BucketChoice:    BucketBestFit,
		Compatible:      []string{CompatTorch},
	}
}

// compatible decodes a policy's compatible list: known properties, each
// once, at least one.
func (l *loader) compatible(d *decoder, a hcl.Attributes, p *Policy) {
	var props []string
	if !d.strList(a, "compatible", &props) {
		return
	}
	rng := a["compatible"].Expr.Range().Ptr()
	for i, c := range props {
		switch {
		case !slices.Contains(Compatibles, c):
			d.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for compatible",
				Detail: fmt.Sprintf("%q is not a property placement can compare; allowed values are %s.%s",
					c, quotedList(Compatibles), didYouMean(c, Compatibles)),
				Subject: rng,
			})
			return
		case slices.Contains(props[:i], c):
			d.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate value in compatible",
				Detail:   fmt.Sprintf("compatible lists %q twice; list each property once.", c),
				Subject:  rng,
			})
			return
		}
	}
	if len(props) == 0 {
		d.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Empty compatible",
			Detail:   fmt.Sprintf("compatible lists the properties every node of a job's group shares; it needs at least one of %s (the default is [\"torch\"]).", quotedList(Compatibles)),
			Subject:  rng,
		})
		return
	}
	p.Compatible = props
}

// slice decodes a policy's slice block (at most one). Its locality is a
// level no looser than the policy's group_locality when that is required:
// a slice is part of the group, so it cannot spread wider than the group.
func (l *loader) slice(d *decoder, p *Policy, blocks hcl.Blocks) *Slice {
	var out *Slice
	for i, b := range blocks {
		if i > 0 {
			d.add(duplicateBlock("policy", "slice", blocks[0].DefRange, b))
			continue
		}
		content, diags := b.Body.Content(sliceSchema)
		l.add(diags...)
		a := content.Attributes
		s := &Slice{DeclRange: b.DefRange}
		okNodes := d.integer(a, "nodes", 1, &s.Nodes)
		okLocality := d.enum(a, "locality", SliceLocalities, &s.Locality)
		if okLocality && p.GroupLocality != LocalityPrefer &&
			slices.Index(GroupLocalities, s.Locality) > slices.Index(GroupLocalities, p.GroupLocality) {
			d.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Slice looser than the group",
				Detail: fmt.Sprintf("The slice's locality %q is looser than the policy's group_locality %q: every slice is part of the job's group, so it cannot spread wider. Use a locality of %s.",
					s.Locality, p.GroupLocality, quotedList(SliceLocalities[:slices.Index(SliceLocalities, p.GroupLocality)+1])),
				Subject: a["locality"].Expr.Range().Ptr(),
			})
			okLocality = false
		}
		if okNodes && okLocality {
			out = s
		}
	}
	return out
}

func (l *loader) fleets(blocks hcl.Blocks) {
	d := l.decoder(newScope().with("var", l.vars).with("local", l.locals).with("ssh", l.sshs))
	declared := map[string]hcl.Range{}
	hostsSeen := map[string]*Host{}
	sshByName := map[string]*SSH{}
	for _, s := range l.cfg.SSH {
		sshByName[s.Name] = s
	}
	for _, b := range blocks {
		name, ok := l.declare(declared, "fleet", false, b)
		if !ok {
			continue
		}
		f := &Fleet{Name: name, DeclRange: b.DefRange}
		content, diags := b.Body.Content(fleetSchema)
		l.add(diags...)
		a := content.Attributes
		if ref, ok := d.reference(a, "ssh", "ssh", "an ssh"); ok {
			f.SSH = sshByName[ref]
		}
		l.location(d, a, &f.Location)
		d.strMap(a, "labels", &f.Labels)
		d.integer(a, "count", 0, &f.Count)

		var gcpBlocks, hostBlocks, bwBlocks hcl.Blocks
		for _, inner := range content.Blocks {
			switch inner.Type {
			case "gcp":
				gcpBlocks = append(gcpBlocks, inner)
			case "link_bandwidth":
				bwBlocks = append(bwBlocks, inner)
			default:
				hostBlocks = append(hostBlocks, inner)
			}
		}
		f.LinkBandwidth = l.linkBandwidth(d, bwBlocks)
		for i, gb := range gcpBlocks {
			if i > 0 {
				l.add(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Duplicate gcp block",
					Detail: fmt.Sprintf("Fleet %q already has a gcp block at %s:%d; a fleet has at most one. Remove this one, or make a second fleet.",
						name, gcpBlocks[0].DefRange.Filename, gcpBlocks[0].DefRange.Start.Line),
					Subject: gb.DefRange.Ptr(),
				})
				continue
			}
			f.GCP = l.gcp(d, name, gb)
		}
		switch {
		case len(gcpBlocks) > 0 && len(hostBlocks) > 0:
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Fleet with both hosts and a gcp block",
				Detail: fmt.Sprintf("Fleet %q lists host blocks and has a gcp block. A fleet either lists its machines as host blocks or has gpulayer create count machines from a gcp block; move one of them to a fleet of its own.",
					name),
				Subject: gcpBlocks[0].DefRange.Ptr(),
			})
		case len(gcpBlocks) > 0 && a["count"] == nil:
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Missing count",
				Detail:   fmt.Sprintf("Fleet %q has a gcp block but no count; set count to the number of machines gpulayer should create (0 to create none).", name),
				Subject:  b.DefRange.Ptr(),
			})
		case len(gcpBlocks) == 0 && a["count"] != nil:
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "count without a gcp block",
				Detail:   fmt.Sprintf("Fleet %q sets count, the number of machines to create, but has no gcp block saying how to create them. Add a gcp block, or list the machines as host blocks and remove count.", name),
				Subject:  a["count"].NameRange.Ptr(),
			})
		case len(gcpBlocks) == 0 && len(hostBlocks) == 0:
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Fleet without machines",
				Detail:   fmt.Sprintf("Fleet %q has no host blocks and no gcp block, so no job can run on it.", name),
				Subject:  b.DefRange.Ptr(),
			})
		}
		if f.GCP != nil {
			// Created machines are where the provider puts them.
			if f.Location.Zone == "" {
				f.Location.Zone = f.GCP.Zone
			}
			if f.Location.Region == "" {
				f.Location.Region = gcpRegion(f.GCP.Zone)
			}
		}
		for _, hb := range hostBlocks {
			h := l.host(d, f, hb)
			if h == nil {
				continue
			}
			if prev, dup := hostsSeen[h.Name]; dup {
				l.add(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Duplicate host name",
					Detail: fmt.Sprintf("Host %q is already declared in fleet %q at %s:%d. Host names must be unique across all fleets; rename one of them.",
						h.Name, prev.Fleet, prev.DeclRange.Filename, prev.DeclRange.Start.Line),
					Subject: hb.LabelRanges[0].Ptr(),
				})
				continue
			}
			hostsSeen[h.Name] = h
			f.Hosts = append(f.Hosts, h)
		}
		l.cfg.Fleets = append(l.cfg.Fleets, f)
	}
	// A created machine's name must not be a declared host's: plans, state
	// and placements name machines and hosts alike.
	for _, f := range l.cfg.Fleets {
		for i := 0; f.GCP != nil && i < f.Count; i++ {
			if h, dup := hostsSeen[f.Name+"-"+strconv.Itoa(i)]; dup {
				d.add(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Created machine named like a host",
					Detail: fmt.Sprintf("Fleet %q creates a machine named %q, and a host of fleet %q has that name (%s:%d); rename the host or the fleet.",
						f.Name, h.Name, h.Fleet, h.DeclRange.Filename, h.DeclRange.Start.Line),
					Subject: f.GCP.DeclRange.Ptr(),
				})
				break
			}
		}
	}
	l.add(d.diags...)
	sort.Slice(l.cfg.Fleets, func(i, j int) bool { return l.cfg.Fleets[i].Name < l.cfg.Fleets[j].Name })
}

// location reads region, zone and network_group over what loc holds. A
// value that could not be evaluated leaves the location unknown, which
// turns off the checks that compare locations.
func (l *loader) location(d *decoder, a hcl.Attributes, loc *Location) {
	for _, f := range []struct {
		name string
		dst  *string
	}{{"region", &loc.Region}, {"zone", &loc.Zone}, {"network_group", &loc.NetworkGroup}} {
		if !d.str(a, f.name, f.dst) && a[f.name] != nil {
			l.locationUnknown = true
		}
	}
}

// gcpRegion is the region of a GCP zone: "europe-west1-b" is in
// "europe-west1".
func gcpRegion(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return ""
}

// host decodes a host block; its location and labels start from the
// fleet's, and what the host sets wins.
func (l *loader) host(d *decoder, f *Fleet, b *hcl.Block) *Host {
	name, nameRange := blockName(b)
	if !l.checkName("host", name, nameRange) {
		return nil
	}
	h := &Host{Name: name, Fleet: f.Name, Location: f.Location, DeclRange: b.DefRange}
	var own map[string]string
	if body, ok := b.Body.(*hclsyntax.Body); ok && l.literal[body] != nil {
		// Parsed in pieces, its arguments already taken (literalHosts):
		// what decoding them gives.
		lh := l.literal[body]
		h.Address, h.Port, _ = splitAddress(lh.values[0])
		for k, dst := range []*string{&h.OwnLocation.Region, &h.OwnLocation.Zone, &h.OwnLocation.NetworkGroup} {
			if lh.set[k+1] {
				*dst = lh.values[k+1]
			}
		}
	} else {
		content, diags := b.Body.Content(hostSchema)
		l.add(diags...)
		a := content.Attributes
		var addr string
		if d.str(a, "address", &addr) {
			host, port, err := splitAddress(addr)
			if err != nil {
				d.add(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid host address",
					Detail:   capitalize(err.Error()) + ".",
					Subject:  a["address"].Expr.Range().Ptr(),
				})
			}
			h.Address, h.Port = host, port
		}
		l.location(d, a, &h.OwnLocation)
		d.strMap(a, "labels", &own)
	}
	h.Location = f.Location.Over(h.OwnLocation)
	if len(f.Labels)+len(own) > 0 {
		h.Labels = make(map[string]string, len(f.Labels)+len(own))
		for k, v := range f.Labels {
			h.Labels[k] = v
		}
		for k, v := range own {
			h.Labels[k] = v
		}
	}
	return h
}

func (l *loader) jobs(blocks hcl.Blocks) {
	d := l.decoder(newScope().with("var", l.vars).with("local", l.locals).with("ssh", l.sshs).with("policy", l.pols))
	declared := map[string]hcl.Range{}
	polByName := map[string]*Policy{}
	for _, p := range l.cfg.Policies {
		polByName[p.Name] = p
	}
	for _, b := range blocks {
		name, ok := l.declare(declared, "job", false, b)
		if !ok {
			continue
		}
		j := &Job{Name: name, GPUsPerNode: DefaultGPUsPerNode, Launcher: LauncherTorchrun, StopTimeout: DefaultStopTimeout,
			StartCheck: DefaultStartCheck, Kind: KindBatch, CompletionGrace: DefaultCompletionGrace, DeclRange: b.DefRange}
		content, diags := b.Body.Content(jobSchema)
		l.add(diags...)
		a := content.Attributes
		if ref, ok := d.reference(a, "policy", "policy", "a policy"); ok {
			j.Policy = polByName[ref]
			j.policyRange = a["policy"].Expr.Range()
		}
		if d.integer(a, "nodes", 1, &j.Nodes) && j.Policy != nil && j.Policy.Slice != nil && j.Nodes%j.Policy.Slice.Nodes != 0 {
			sl := j.Policy.Slice
			d.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "nodes not a multiple of the slice",
				Detail: fmt.Sprintf("Job %q asks for %d nodes, but its policy %q places nodes in slices of %d (slice block at %s); set nodes to a multiple of %d.",
					name, j.Nodes, j.Policy.Name, sl.Nodes, sl.DeclRange.String(), sl.Nodes),
				Subject: a["nodes"].Expr.Range().Ptr(),
			})
		}
		d.integer(a, "gpus_per_node", 0, &j.GPUsPerNode)
		if d.strList(a, "command", &j.Command) && len(j.Command) == 0 {
			d.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Empty command",
				Detail:   "command is the program and its arguments, such as [\"python\", \"train.py\"]; it cannot be empty.",
				Subject:  a["command"].Expr.Range().Ptr(),
			})
		}
		d.env(a, &j.Env)
		d.str(a, "workdir", &j.Workdir)
		d.strMap(a, "labels", &j.Labels)
		d.enum(a, "launcher", Launchers, &j.Launcher)
		d.duration(a, "stop_timeout", &j.StopTimeout)
		if d.duration(a, "start_check", &j.StartCheck) && j.StartCheck > MaxStartCheck {
			d.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for start_check",
				Detail:   fmt.Sprintf("start_check is how long a node must run after it starts to count as started, at most %s; got %s.", MaxStartCheck, j.StartCheck),
				Subject:  a["start_check"].Expr.Range().Ptr(),
			})
		}
		if d.integer(a, "master_port", 1, &j.MasterPort) && j.MasterPort > 65535 {
			d.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for master_port",
				Detail:   fmt.Sprintf("master_port is a TCP port, 1 to 65535; got %d.", j.MasterPort),
				Subject:  a["master_port"].Expr.Range().Ptr(),
			})
		}
		d.enum(a, "kind", Kinds, &j.Kind)
		d.duration(a, "completion_grace", &j.CompletionGrace)
		d.duration(a, "deadline", &j.Deadline)
		d.duration(a, "stall_timeout", &j.StallTimeout)
		d.duration(a, "expected_duration", &j.ExpectedDuration)
		blocksOf := content.Blocks.ByType()
		j.Restart = l.restart(d, j.Kind, blocksOf["restart"])
		l.torchrunBlocks(d, j, blocksOf["torchrun"], a["launcher"])
		l.codeAndSetup(d, j, a, content.Blocks)
		l.cfg.Jobs = append(l.cfg.Jobs, j)
	}
	l.add(d.diags...)
	sort.Slice(l.cfg.Jobs, func(i, j int) bool { return l.cfg.Jobs[i].Name < l.cfg.Jobs[j].Name })
}

// restart decodes a job's restart block (at most one) over the defaults of
// its kind: a batch job is not restarted after its own failures and is
// restarted 3 times after losing a machine; a service, always.
func (l *loader) restart(d *decoder, kind string, blocks hcl.Blocks) Restart {
	r := Restart{Attempts: 0, OnLost: DefaultOnLost, Delay: DefaultRestartDelay, MaxDelay: DefaultRestartMaxDelay, LostAfter: DefaultLostAfter}
	if kind == KindService {
		r.Attempts, r.OnLost = -1, -1
	}
	for i, b := range blocks {
		if i > 0 {
			d.add(duplicateBlock("job", "restart", blocks[0].DefRange, b))
			continue
		}
		content, diags := b.Body.Content(restartSchema)
		l.add(diags...)
		a := content.Attributes
		d.integer(a, "attempts", -1, &r.Attempts)
		d.integer(a, "on_lost", -1, &r.OnLost)
		d.exitCodes(a, "retry_exit_codes", &r.RetryExitCodes)
		d.exitCodes(a, "fail_exit_codes", &r.FailExitCodes)
		d.duration(a, "delay", &r.Delay)
		d.duration(a, "max_delay", &r.MaxDelay)
		d.duration(a, "lost_after", &r.LostAfter)
		if r.MaxDelay < r.Delay && a["max_delay"] != nil {
			d.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for max_delay",
				Detail:   fmt.Sprintf("max_delay (%s) is the longest a delay grows to; it cannot be shorter than delay (%s).", r.MaxDelay, r.Delay),
				Subject:  a["max_delay"].Expr.Range().Ptr(),
			})
		}
		for _, c := range r.RetryExitCodes {
			if slices.Contains(r.FailExitCodes, c) && a["fail_exit_codes"] != nil {
				d.add(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Exit code both retried and failed",
					Detail:   fmt.Sprintf("Exit code %d is in both retry_exit_codes and fail_exit_codes; a code can be one or the other.", c),
					Subject:  a["fail_exit_codes"].Expr.Range().Ptr(),
				})
				break
			}
		}
	}
	if r.MaxDelay < r.Delay {
		r.MaxDelay = r.Delay
	}
	return r
}

// crossChecks are the problems that need the whole configuration: a job
// whose policy allows only regions where no machine is declared.
func (l *loader) crossChecks() {
	if l.locationUnknown {
		return
	}
	declared := map[string]bool{}
	for _, h := range l.cfg.Hosts() {
		declared[h.Location.Region] = true
		declared[h.Location.Zone] = true
	}
	for _, f := range l.cfg.Fleets {
		if f.GCP != nil {
			declared[f.Location.Region] = true
			declared[f.Location.Zone] = true
		}
	}
	delete(declared, "")
	for _, j := range l.cfg.Jobs {
		p := j.Policy
		if p == nil || len(p.Regions) == 0 {
			continue
		}
		matched := false
		for _, r := range p.Regions {
			matched = matched || declared[r]
		}
		if matched {
			continue
		}
		known := "no fleet declares a region or zone"
		if len(declared) > 0 {
			known = "the declared regions and zones are " + quotedAndList(sortedKeys(declared))
		}
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Policy regions match no declared machine",
			Detail: fmt.Sprintf("Job %q uses policy %q, which allows only %s, but %s. The job cannot be placed until a machine there exists.%s",
				j.Name, p.Name, quotedList(p.Regions), known, didYouMean(p.Regions[0], sortedKeys(declared))),
			Subject: j.policyRange.Ptr(),
		})
	}
}

// Hosts returns every static host of every fleet, by fleet name and then
// in declaration order.
func (c *Config) Hosts() []*Host {
	var hosts []*Host
	for _, f := range c.Fleets {
		hosts = append(hosts, f.Hosts...)
	}
	return hosts
}

// EffectivePolicy is the job's policy, or DefaultPolicy when it names none.
func (j *Job) EffectivePolicy() *Policy {
	if j.Policy != nil {
		return j.Policy
	}
	return DefaultPolicy()
}

func stringList(s []string) cty.Value {
	if len(s) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(s))
	for i, v := range s {
		vals[i] = cty.StringVal(v)
	}
	return cty.ListVal(vals)
}

func stringMap(m map[string]string) cty.Value {
	if len(m) == 0 {
		return cty.MapValEmpty(cty.String)
	}
	vals := make(map[string]cty.Value, len(m))
	for k, v := range m {
		vals[k] = cty.StringVal(v)
	}
	return cty.MapVal(vals)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	if s[0] == '"' {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
