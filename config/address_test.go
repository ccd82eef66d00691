package config

import (
	"strings"
	"testing"
)

func TestSplitAddressAcceptsHostOrHostPortWithBracketedIPv6(t *testing.T) {
	tests := []struct {
		addr, host string
		port       int
		errPart    string
	}{
		{addr: "10.0.0.1", host: "10.0.0.1"},
		{addr: "10.0.0.1:2222", host: "10.0.0.1", port: 2222},
		{addr: "gpu-01.lab.example.org", host: "gpu-01.lab.example.org"},
		{addr: "gpu_01:22", host: "gpu_01", port: 22},
		{addr: "[fd00::1]", host: "fd00::1"},
		{addr: "[fd00::1]:22", host: "fd00::1", port: 22},
		{addr: "", errPart: "empty"},
		{addr: "fd00::1", errPart: "without brackets"},
		{addr: "a:b:c", errPart: "more than one colon"},
		{addr: "host:", errPart: "no port"},
		{addr: "host:0", errPart: "1 to 65535"},
		{addr: "host:65536", errPart: "1 to 65535"},
		{addr: "host:ssh", errPart: "1 to 65535"},
		{addr: "ubuntu@host", errPart: "user name"},
		{addr: "ssh://host", errPart: "URL"},
		{addr: "[fd00::1", errPart: "does not close"},
		{addr: "[10.0.0.1]", errPart: "only for IPv6"},
		{addr: "[fd00::1]x", errPart: "only :port"},
		{addr: "bad host", errPart: "not a host name"},
		{addr: "-lead.example", errPart: "not a host name"},
	}
	for _, tc := range tests {
		host, port, err := splitAddress(tc.addr)
		if tc.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("splitAddress(%q) error = %v, want one mentioning %q", tc.addr, err, tc.errPart)
			}
			continue
		}
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("splitAddress(%q) = %q, %d, %v; want %q, %d", tc.addr, host, port, err, tc.host, tc.port)
		}
	}
}

func TestCheckBastionAcceptsUserAtHostPort(t *testing.T) {
	for _, ok := range []string{"jump", "jump.example.org:2222", "ubuntu@jump", "ubuntu@[fd00::1]:22"} {
		if err := checkBastion(ok); err != nil {
			t.Errorf("checkBastion(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"@jump", "ubuntu@", "a b@jump", "jump:99999"} {
		if err := checkBastion(bad); err == nil {
			t.Errorf("checkBastion(%q) accepted it", bad)
		}
	}
}

func TestDidYouMeanSuggestsOnlyCloseNames(t *testing.T) {
	tests := []struct {
		given string
		cands []string
		want  string
	}{
		{"tigth", []string{"tight", "loose"}, ` Did you mean "tight"?`},
		{"zones", []string{"prefer", "zone", "region"}, ` Did you mean "zone"?`},
		{"x", []string{"nodes"}, ""},
		{"completely_different", []string{"nodes"}, ""},
		{"a", nil, ""},
	}
	for _, tc := range tests {
		if got := didYouMean(tc.given, tc.cands); got != tc.want {
			t.Errorf("didYouMean(%q) = %q, want %q", tc.given, got, tc.want)
		}
	}
}
