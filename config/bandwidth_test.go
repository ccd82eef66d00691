package config

import (
	"strings"
	"testing"
)

func TestParseBandwidthReadsBitsAndBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		bits float64
		out  string
	}{
		{"100Gbps", 100e9, "100 Gb/s"},
		{"100 Gb/s", 100e9, "100 Gb/s"},
		{"900GB/s", 900 * 8e9, "900 GB/s"},
		{"1.6Tbps", 1.6e12, "1.6 Tb/s"},
		{"25.5 MB/s", 25.5 * 8e6, "25.5 MB/s"},
	} {
		b, err := ParseBandwidth(c.in)
		if err != nil || b.BitsPerSecond != c.bits || b.String() != c.out {
			t.Errorf("ParseBandwidth(%q) = %v (%g b/s), %v; want %g b/s, %q", c.in, b, b.BitsPerSecond, err, c.bits, c.out)
		}
	}
	// The unit's case says bits or bytes: never guessed, never folded.
	for _, bad := range []string{"100", "100gbps", "100GBps", "100 Gbit/s", "0Gbps", "0.0GB/s", "-5Gbps", "1e3Gbps", "100  Gbps", "Gbps", "", "100Gbps ", "9999999999Gbps", strings.Repeat("9", 100) + "Gbps"} {
		if b, err := ParseBandwidth(bad); err == nil {
			t.Errorf("ParseBandwidth(%q) = %v, want an error", bad, b)
		}
	}
}

func TestFleetLinkBandwidthOverridesByLevel(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "main.hcl", `fleet "lab" {
  zone = "z1"
  link_bandwidth {
    zone          = "100Gbps"
    nvlink_domain = "900GB/s"
  }
  host "a1" { address = "10.0.0.1" }
}
policy "nvl" {
  group_locality = "nvlink_domain"
  slice {
    nodes    = 2
    locality = "nvlink_domain"
  }
}
`)
	cfg, diags := Load(dir, LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagList(diags))
	}
	lb := cfg.Fleets[0].LinkBandwidth
	if lb == nil || len(lb.ByLevel) != 2 || lb.ByLevel["zone"].String() != "100 Gb/s" || lb.ByLevel["nvlink_domain"].String() != "900 GB/s" || lb.DeclRange.Start.Line != 3 {
		t.Fatalf("link_bandwidth %+v, want zone 100 Gb/s and nvlink_domain 900 GB/s from line 3", lb)
	}
	if p := cfg.Policies[0]; p.GroupLocality != LocalityNVLinkDomain || p.Slice == nil || p.Slice.Locality != LocalityNVLinkDomain {
		t.Errorf("policy %+v, want nvlink_domain with slices per nvlink_domain", p)
	}
}

func TestFleetLinkBandwidthRejectsBadValuesAtTheirLine(t *testing.T) {
	for _, tt := range []struct{ body, summary, detail string }{
		{"link_bandwidth {\n    zone = \"100gbps\"\n  }", "Invalid bandwidth", `link_bandwidth zone: "100gbps" is not a bandwidth`},
		{"link_bandwidth {\n    zone = \"100\"\n  }", "Invalid bandwidth", "write a number and a unit"},
		{"link_bandwidth {\n    zone = 100\n  }", "Invalid bandwidth", `"100" is not a bandwidth`},
		{"link_bandwidth {\n    rack = \"1Gbps\"\n  }", "Unsupported argument", ""},
		{"link_bandwidth {\n  }\n  link_bandwidth {\n  }", "Duplicate link_bandwidth block", "the first is at"},
	} {
		dir := t.TempDir()
		writeFile(t, dir, "main.hcl", "fleet \"lab\" {\n  "+tt.body+"\n  host \"a1\" { address = \"10.0.0.1\" }\n}\n")
		_, diags := Load(dir, LoadOptions{})
		if len(diags) != 1 || diags[0].Summary != tt.summary || !strings.Contains(diags[0].Detail, tt.detail) {
			t.Errorf("%s: diagnostics\n%s\nwant one %q with %q", tt.body, diagList(diags), tt.summary, tt.detail)
			continue
		}
		if s := diags[0].Subject; s == nil || s.Filename == "" || s.Start.Line < 2 {
			t.Errorf("%s: diagnostic without the value's line: %+v", tt.body, s)
		}
	}
}
