package topology

import (
	"errors"
	"strconv"
	"strings"
)

// ParseSMIFabric reads the Fabric sections of `nvidia-smi -q` output: one
// GPUFabric per GPU that has one, in the order printed (nvidia-smi lists
// GPUs by bus id, which is their index order), each with the bus id of the
// "GPU 00000000:07:00.0" line above it. A Fabric section is the line
// "Fabric" and the lines indented deeper below it; only its first level of
// keys is read (State, Status, CliqueId, ClusterUUID, with the spellings
// drivers use: "Cluster UUID", "Clique ID"), never its Health sub-section.
// Text cut out of a longer output (a grep of the Fabric lines, re-indented
// or without GPU lines) reads the same; a section without a GPU line above
// it has no bus id.
//
// The text comes from a machine: a value that is not what the field holds
// (a clique id that is not a number, a cluster UUID that is not a UUID)
// is left empty, and the error, returned beside what could be read, says
// which. Only the first MaxGPUs sections are read.
func ParseSMIFabric(text string) ([]GPUFabric, error) {
	var out []GPUFabric
	var errs []error
	bad := func(line int, format string, args ...any) {
		if len(errs) < 8 {
			errs = append(errs, errAt(line, format, args...))
		}
	}
	// The GPU the next section belongs to: its bus id and index, from the
	// last GPU line; an excerpt without GPU lines numbers its sections.
	busID, index, headers := "", 0, 0
	in := false // inside a Fabric section
	fabricIndent, keyIndent := 0, -1
	for no, raw := range strings.Split(text, "\n") {
		line := strings.TrimRight(raw, " \t\r")
		content := strings.TrimLeft(line, " \t")
		if content == "" {
			continue
		}
		indent := indentOf(line[:len(line)-len(content)])
		if in && indent <= fabricIndent {
			in = false
		}
		switch {
		case in:
			if indent < keyIndent || keyIndent < 0 {
				keyIndent = indent
			}
			key, value, ok := strings.Cut(content, ":")
			if !ok || indent != keyIndent {
				continue // a sub-section (Health) or its lines
			}
			f := &out[len(out)-1]
			value = strings.TrimSpace(value)
			switch normalKey(key) {
			case "state":
				f.State = value
			case "status":
				f.Status = value
			case "cliqueid":
				if v, err := strconv.ParseUint(value, 10, 32); err == nil {
					f.CliqueID = uint32(v)
				} else if !unknownValue(value) {
					bad(no+1, "clique id %q is not a number", value)
				}
			case "clusteruuid":
				if u, ok := canonicalUUID(value); ok {
					f.ClusterUUID = u
				} else if !unknownValue(value) {
					bad(no+1, "cluster UUID %q is not a UUID", value)
				}
			}
		case strings.EqualFold(content, "Fabric"):
			if len(out) == MaxGPUs {
				bad(no+1, "more than %d Fabric sections; the rest are ignored", MaxGPUs)
				return out, errors.Join(errs...)
			}
			if busID == "" {
				index = len(out)
			}
			out = append(out, GPUFabric{Index: index, BusID: busID})
			busID = "" // an excerpt may repeat sections without GPU lines
			in, fabricIndent, keyIndent = true, indent, -1
		case indent == 0 && strings.HasPrefix(content, "GPU ") && strings.Contains(content, ":"):
			busID, index = strings.TrimSpace(content[len("GPU "):]), headers
			headers++
		}
	}
	return out, errors.Join(errs...)
}

// indentOf is the width of a line's leading blanks, a tab counting as 4:
// nvidia-smi indents by 4 spaces a level, and a copy may have tabs.
func indentOf(lead string) int {
	n := 0
	for _, c := range lead {
		if c == '\t' {
			n += 4
		} else {
			n++
		}
	}
	return n
}

// normalKey lower-cases a key and drops its spaces: "Cluster UUID" and
// "ClusterUUID" are one field.
func normalKey(k string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(k), " ", ""))
}

// unknownValue says the value is nvidia-smi's way of saying none.
func unknownValue(v string) bool {
	return v == "" || v == "N/A" || v == "[N/A]" || v == "Not Supported" || v == "[Not Supported]"
}

// canonicalUUID is u in lower-case 8-4-4-4-12 form, and whether it is one.
func canonicalUUID(u string) (string, bool) {
	if len(u) != 36 {
		return "", false
	}
	b := []byte(strings.ToLower(u))
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return "", false
			}
		}
	}
	return string(b), true
}
