package probe

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/ssh"
)

func TestBastionSpecsBecomeTargetsThroughTheConfigParser(t *testing.T) {
	via := ssh.Target{User: "ubuntu", KnownHostsFile: "/kh", HostKeyCheck: "strict"}
	tests := []struct {
		spec, user, addr string
		port             int
	}{
		{"jump.example.org", "ubuntu", "jump.example.org", 22},
		{"ops@jump.example.org:2200", "ops", "jump.example.org", 2200},
		{"[fd00:10::1]", "ubuntu", "fd00:10::1", 22},
		{"ops@[fd00:10::1]:2222", "ops", "fd00:10::1", 2222},
	}
	for _, tt := range tests {
		b, err := parseBastion(tt.spec, via)
		if err != nil {
			t.Fatalf("%s: %v", tt.spec, err)
		}
		if b.User != tt.user || b.Address != tt.addr || b.Port != tt.port || b.KnownHostsFile != "/kh" {
			t.Errorf("%s: got %s@%s:%d (known_hosts %q), want %s@%s:%d", tt.spec, b.User, b.Address, b.Port, b.KnownHostsFile, tt.user, tt.addr, tt.port)
		}
	}
	if _, err := parseBastion("ops@jump:99999", via); err == nil || !strings.Contains(err.Error(), "99999") {
		t.Errorf("bad port: error %v, want one naming the port", err)
	}
}
