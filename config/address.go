package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// splitAddress checks a host address, "host" or "host:port" with an IPv6
// address in brackets ("[fd00::1]:2222"), and returns its parts. port is 0
// when none is given. The error is a sentence for a diagnostic.
func splitAddress(addr string) (host string, port int, err error) {
	if addr == "" {
		return "", 0, fmt.Errorf("the address is empty; write a host name or an IP address, optionally with :port")
	}
	if strings.Contains(addr, "@") {
		return "", 0, fmt.Errorf("%q holds a user name; write only the host here and set user in the fleet's ssh block", addr)
	}
	if strings.Contains(addr, "://") {
		return "", 0, fmt.Errorf("%q is a URL; write only the host, optionally with :port", addr)
	}
	host = addr
	portText := ""
	switch {
	case strings.HasPrefix(addr, "["):
		end := strings.Index(addr, "]")
		if end < 0 {
			return "", 0, fmt.Errorf("%q opens a bracket it does not close; write an IPv6 address as [fd00::1] or [fd00::1]:22", addr)
		}
		host = addr[1:end]
		rest := addr[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return "", 0, fmt.Errorf("%q has %q after the bracketed address; only :port may follow", addr, rest)
			}
			portText = rest[1:]
			if portText == "" {
				return "", 0, fmt.Errorf("%q ends with a colon but no port", addr)
			}
		}
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return "", 0, fmt.Errorf("%q is not an IPv6 address; brackets are only for IPv6", host)
		}
	case strings.Count(addr, ":") > 1:
		if net.ParseIP(addr) != nil {
			return "", 0, fmt.Errorf("%q is an IPv6 address without brackets; write it as [%s], or [%s]:22 with a port", addr, addr, addr)
		}
		return "", 0, fmt.Errorf("%q has more than one colon; write host or host:port, and an IPv6 address in brackets", addr)
	case strings.Contains(addr, ":"):
		host, portText, _ = strings.Cut(addr, ":")
		if portText == "" {
			return "", 0, fmt.Errorf("%q ends with a colon but no port", addr)
		}
		fallthrough
	default:
		if !validHostName(host) {
			return "", 0, fmt.Errorf("%q is not a host name or an IP address", host)
		}
	}
	if portText != "" {
		p, perr := strconv.Atoi(portText)
		if perr != nil || p < 1 || p > 65535 {
			return "", 0, fmt.Errorf("port %q is not a number from 1 to 65535", portText)
		}
		port = p
	}
	return host, port, nil
}

// validHostName accepts an IPv4 address or a DNS name: labels of letters,
// digits and hyphens (underscores too, as some internal zones use them),
// separated by dots.
func validHostName(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// Bastion is a parsed `bastion` attribute of an ssh block.
type Bastion struct {
	User    string // "" when the spec names none: the ssh block's user
	Address string // host name or IP, without brackets
	Port    int    // 0 when the spec names none
}

// ParseBastion reads a bastion: "host", "host:port", "user@host" or
// "user@host:port", with an IPv6 address in brackets. It is the one reader of
// the attribute: Load checks it with it, and the probe builds its SSH target
// from it. The error is a sentence for a diagnostic.
func ParseBastion(spec string) (Bastion, error) {
	user, hostPort, hasUser := strings.Cut(spec, "@")
	if !hasUser {
		hostPort, user = user, ""
	}
	if hasUser && (user == "" || strings.ContainsAny(user, " \t:/")) {
		return Bastion{}, fmt.Errorf("%q has an invalid user name before @", spec)
	}
	host, port, err := splitAddress(hostPort)
	if err != nil {
		return Bastion{}, err
	}
	return Bastion{User: user, Address: host, Port: port}, nil
}

// checkBastion checks a bastion for Load.
func checkBastion(b string) error {
	_, err := ParseBastion(b)
	return err
}
