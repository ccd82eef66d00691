package sandbox

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpulayer/gpulayer/config"
)

// Config renders the sandbox's configuration: one ssh block with the
// client key and known_hosts, and the machines' fleets (one per region,
// unless Like named them) whose hosts carry their zone and network group.
func Config(s *Sandbox) []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	body.AppendUnstructuredTokens(hclwrite.Tokens{{
		Type: hclsyntax.TokenComment,
		Bytes: []byte(fmt.Sprintf("# Written by `gpulayer sandbox`: %d simulated GPU machines on 127.0.0.1.\n"+
			"# They answer only while the sandbox runs.\n", len(s.Machines))),
	}})
	sshBlock := body.AppendNewBlock("ssh", []string{"sandbox"}).Body()
	sshBlock.SetAttributeValue("user", cty.StringVal(s.User))
	sshBlock.SetAttributeValue("identity_file", cty.StringVal(s.KeyPath()))
	sshBlock.SetAttributeValue("known_hosts", cty.StringVal(s.KnownHostsPath()))
	sshBlock.SetAttributeValue("host_key_check", cty.StringVal("strict"))

	var fleets []string
	for _, m := range s.Machines {
		if !slices.Contains(fleets, m.Fleet) {
			fleets = append(fleets, m.Fleet)
		}
	}
	for _, name := range fleets {
		body.AppendNewline()
		fleet := body.AppendNewBlock("fleet", []string{name}).Body()
		fleet.SetAttributeTraversal("ssh", hcl.Traversal{hcl.TraverseRoot{Name: "ssh"}, hcl.TraverseAttr{Name: "sandbox"}})
		region, shared := "", true
		for _, m := range s.Machines {
			if m.Fleet == name {
				if region != "" && m.Region != region {
					shared = false
				}
				region = m.Region
			}
		}
		if shared && region != "" {
			fleet.SetAttributeValue("region", cty.StringVal(region))
		}
		for _, m := range s.Machines {
			if m.Fleet != name {
				continue
			}
			fleet.AppendNewline()
			host := fleet.AppendNewBlock("host", []string{m.Name}).Body()
			host.SetAttributeValue("address", cty.StringVal(net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Port))))
			if !shared && m.Region != "" {
				host.SetAttributeValue("region", cty.StringVal(m.Region))
			}
			if m.Zone != "" {
				host.SetAttributeValue("zone", cty.StringVal(m.Zone))
			}
			if m.Network != "" {
				host.SetAttributeValue("network_group", cty.StringVal(m.Network))
			}
		}
	}
	return hclwrite.Format(f.Bytes())
}

// LikeConfig are the spots of cfg's declared hosts, in the order cfg lists
// them (fleets by name, hosts as declared), each where the configuration
// puts it: a sandbox started with them answers as those hosts would.
func LikeConfig(cfg *config.Config) []Spot {
	var out []Spot
	for _, f := range cfg.Fleets {
		for _, h := range f.Hosts {
			out = append(out, Spot{Name: h.Name, Fleet: f.Name, Region: h.Location.Region, Zone: h.Location.Zone, NetworkGroup: h.Location.NetworkGroup})
		}
	}
	return out
}
