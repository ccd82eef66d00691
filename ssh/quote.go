package ssh

import "strings"

// Quote returns s quoted for a POSIX sh command line, so that the shell
// reads it back as exactly one word equal to s. Words made only of
// characters the shell never treats specially are returned unchanged, to
// keep commands readable; everything else is single-quoted.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isShellSafe(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func isShellSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("@%+:,./_-", c) >= 0:
		default:
			return false
		}
	}
	return true
}
