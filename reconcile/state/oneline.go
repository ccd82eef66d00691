package state

import "strings"

// oneLineError is a job's error as apply has kept it since 2026-12-03:
// on one line ("...; the log ends with: a | b; the nodes it started on
// ... could not be stopped: ..."). A gpulayer before then kept a failed
// launch's error as it printed it, the log's last lines under it one
// "  | " line each; every view shows an error inside one line of its
// own, where a newline is drawn as U+FFFD. decode reads such an error
// into today's form, so that nothing downstream meets the old one.
func oneLineError(err string) string {
	first, rest, found := strings.Cut(err, "\n")
	if !found {
		return err
	}
	var log, other []string
	for l := range strings.SplitSeq(rest, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || l == "|":
		case strings.HasPrefix(l, "| "):
			log = append(log, strings.TrimPrefix(l, "| "))
		default:
			other = append(other, l)
		}
	}
	if len(log) > 0 {
		first += " " + strings.Join(log, " | ")
	}
	for _, l := range other {
		first += "; " + l
	}
	return first
}

// oneLineErrors puts every job's error and every earlier run's message
// on one line (oneLineError).
func oneLineErrors(s *State) {
	for _, jobs := range [][]Job{s.Jobs, s.Leftovers} {
		for i := range jobs {
			jobs[i].Error = oneLineError(jobs[i].Error)
			for h := range jobs[i].History {
				jobs[i].History[h].Message = oneLineError(jobs[i].History[h].Message)
			}
		}
	}
}
