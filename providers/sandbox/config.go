package sandbox

import (
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// Config renders the sandbox's configuration: one ssh block with the
// client key and known_hosts, and one fleet per region whose hosts carry
// their zone and network group.
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

	for _, r := range regions {
		var fleet *hclwrite.Body
		for _, m := range s.Machines {
			if m.Region != r.name {
				continue
			}
			if fleet == nil {
				body.AppendNewline()
				fleet = body.AppendNewBlock("fleet", []string{r.name}).Body()
				fleet.SetAttributeTraversal("ssh", hcl.Traversal{hcl.TraverseRoot{Name: "ssh"}, hcl.TraverseAttr{Name: "sandbox"}})
				fleet.SetAttributeValue("region", cty.StringVal(r.name))
			}
			fleet.AppendNewline()
			host := fleet.AppendNewBlock("host", []string{m.Name}).Body()
			host.SetAttributeValue("address", cty.StringVal(net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Port))))
			host.SetAttributeValue("zone", cty.StringVal(m.Zone))
			host.SetAttributeValue("network_group", cty.StringVal(m.Network))
		}
	}
	return hclwrite.Format(f.Bytes())
}
