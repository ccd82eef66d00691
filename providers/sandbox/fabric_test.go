package sandbox_test

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/facts"
)

// TestProbingTheSimulatedNVLinkDomain: the trays an NVLinkDomain adds
// answer nvidia-smi -q with their fabric registration, so a probe puts
// every one of them, and no other machine, in one NVLink domain.
func TestProbingTheSimulatedNVLinkDomain(t *testing.T) {
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			sb, err := sandbox.Start(sandbox.Options{Hosts: 2, NVLinkDomain: 4, Dir: t.TempDir(), Shell: shell})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sb.Close() })
			doc := probeSandbox(t, sb, newPool(t))
			if len(doc.Hosts) != 6 {
				t.Fatalf("%d hosts probed, want 6", len(doc.Hosts))
			}
			domain := ""
			for _, m := range sb.Machines {
				h := doc.Find(m.Name)
				if h == nil || h.Status != facts.StatusOK || len(h.Warnings) > 0 {
					t.Fatalf("%s: %+v", m.Name, h)
				}
				tray := strings.HasPrefix(m.Name, "nvl-")
				switch {
				case tray && domain == "":
					domain = h.NVLinkDomain
					if !strings.HasSuffix(domain, ":32766") {
						t.Errorf("%s: NVLink domain %q, want one of clique 32766", m.Name, domain)
					}
				case tray && h.NVLinkDomain != domain:
					t.Errorf("%s: NVLink domain %q, want the other trays' %q", m.Name, h.NVLinkDomain, domain)
				case !tray && h.NVLinkDomain != "":
					t.Errorf("%s (%s): NVLink domain %q, want none", m.Name, m.Model.Model, h.NVLinkDomain)
				}
				if tray && (h.Location.NetworkGroup != "europe-west1-b-nvl72" || len(h.GPUs) != 4 || h.GPUs[0].Name != "NVIDIA GB200") {
					t.Errorf("%s: %+v", m.Name, h)
				}
			}
		})
	}
}

func TestStartRefusesAnNVLinkDomainBeyondOneRack(t *testing.T) {
	for _, n := range []int{-1, sandbox.MaxNVLinkDomain + 1} {
		if _, err := sandbox.Start(sandbox.Options{Hosts: 1, NVLinkDomain: n, Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "--nvlink-domain") {
			t.Errorf("NVLinkDomain %d: error %v", n, err)
		}
	}
}
